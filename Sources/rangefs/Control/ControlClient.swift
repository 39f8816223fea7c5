import Foundation
import Glibc
import RangeFSCore

/// Talks to a running mount's control socket.
struct ControlClient {
    let socketPath: String
    let mountpoint: String

    /// The mount to talk to: `mountpoint` if given, else the only one running.
    static func locate(_ mountpoint: String?) throws -> ControlClient {
        let directory = ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid())
        if let mountpoint {
            let target = MountPoint.absolute(mountpoint)
            return ControlClient(socketPath: ControlSocket.path(forMountpoint: target, in: directory), mountpoint: target)
        }
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".sock") }.map { directory + "/" + $0 }
        let live = sockets.compactMap { path -> ControlClient? in
            let client = ControlClient(socketPath: path, mountpoint: "")
            guard let answer = try? client.send(ControlRequest(command: .identify), timeout: 5), answer.ok else {
                return nil
            }
            return ControlClient(socketPath: path, mountpoint: answer.mountpoint ?? "")
        }
        guard live.count == 1 else {
            throw CLIError(live.isEmpty ? "no running rangefs mount found (no control socket in \(directory))"
                : "several rangefs mounts are running; name one with --mount MOUNTPOINT")
        }
        return live[0]
    }

    /// Sends one request and returns the answer; with `timeout`, gives up on a mount that does not answer within
    /// that many seconds.
    func send(_ request: ControlRequest, timeout: Int? = nil) throws -> ControlResponse {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        if let timeout {
            var limit = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        guard case (var address, let length)? = unixSocketAddress(socketPath) else { throw CLIError("socket path too long") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) }
        }
        guard connected == 0 else {
            let place = mountpoint.isEmpty ? socketPath : mountpoint
            throw CLIError("no running rangefs mount at \(place) (cannot reach \(socketPath))")
        }
        var data = try JSONEncoder().encode(request)
        data.append(UInt8(ascii: "\n"))
        _ = data.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = recv(descriptor, &buffer, buffer.count, 0)
            if got <= 0 { break }
            received.append(contentsOf: buffer[..<got])
            if buffer[..<got].contains(UInt8(ascii: "\n")) { break }
        }
        guard let line = received.split(separator: UInt8(ascii: "\n")).first else {
            throw CLIError("the mount at \(mountpoint) did not answer")
        }
        var response = try JSONDecoder().decode(ControlResponse.self, from: Data(line))
        if response.mountpoint == nil { response.mountpoint = mountpoint }
        return response
    }

    /// Sends a request and turns a refusal into an error with the mount's message.
    func perform(_ request: ControlRequest) throws -> ControlResponse {
        let response = try send(request)
        guard response.ok else { throw CLIError(response.error ?? "the mount refused the request") }
        return response
    }
}

/// A one-line error for the user; main prints it as `rangefs: MESSAGE` and exits 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
