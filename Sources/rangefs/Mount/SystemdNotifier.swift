import FoundationEssentials
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
        guard case (var address, let length)? = unixSocketAddress(path) else { return }
        _ = Array(state.utf8).withUnsafeBytes { message in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, message.baseAddress, message.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
    }
}
