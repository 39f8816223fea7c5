import Foundation
import Glibc

/// The sd_notify protocol (for `Type=notify` units), without libsystemd: one datagram to $NOTIFY_SOCKET.
enum SystemdNotifier {
    /// Sends `state` (e.g. "READY=1") if rangefs runs under systemd with notification enabled.
    static func notify(_ state: String) {
        guard var path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return }
        if path.hasPrefix("@") { path = "\0" + path.dropFirst() }  // an abstract socket
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        _ = Array(state.utf8).withUnsafeBytes { message in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, message.baseAddress, message.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
    }
}
