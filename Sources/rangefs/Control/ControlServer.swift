// The mount's control socket: a unix stream socket, owner-only. Its folder is checked (or made) as a private folder
// of this user first (ControlSocketFolder.swift), and each connection's peer must be this user (SO_PEERCRED): a
// request of another user is refused unread. Each connection carries one request line and gets one response line.
// One thread accepts (AcceptLoop.swift); each request is answered on a queue of its own, at most eight at once, so
// an `add` waiting for a slow server does not hold up a `status`.

import Dispatch
import FoundationEssentials
import Glibc
import RangeFSControl
import Logging
import RangeFSPlatform
import RangeFSSystem

/// Serves control requests for one mount until `stop`.
public final class ControlServer: @unchecked Sendable {
    // @unchecked Sendable: `loop` and `path` are immutable; the handler is a Sendable closure.
    public let path: String
    /// Accepts; answers at most eight requests at once, more wait in the socket's backlog.
    private let loop: AcceptLoop
    private let handler: @Sendable (ControlRequest) -> ControlResponse
    private let logger: Logger

    /// Creates the socket at `path` (replacing a dead one left by a killed daemon) and starts serving; throws
    /// `SocketFolderRefusal` if its folder is not a private folder of this user.
    public init(path: String, logger: Logger, handler: @escaping @Sendable (ControlRequest) -> ControlResponse) throws {
        self.path = path
        self.handler = handler
        self.logger = logger
        try ControlSocketFolder.prepare(FileSystemCalls.parentDirectory(of: path), uid: geteuid())
        unlink(path)
        guard case (var address, let length)? = unixSocketAddress(path) else {
            throw SystemError(call: "bind", path: path, errno: .nameTooLong)
        }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            let code = errno
            close(listener)
            throw SystemError(call: "bind", path: path, errno: Errno(rawValue: code))
        }
        chmod(path, 0o600)
        loop = AcceptLoop(listener: listener, name: "rangefs-control", concurrency: 8)
        loop.start { [self] connection in answer(connection) }
    }

    /// Stops serving and removes the socket.
    public func stop() {
        loop.stop()
        unlink(path)
    }

    private func answer(_ connection: Int32) {
        let peer = PeerCredentials.of(connection)
        guard let peer, peer.isSameUser else { return refuse(connection, peer: peer) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !received.contains(UInt8(ascii: "\n")) && received.count < 1 << 20 {
            let got = recv(connection, &buffer, buffer.count, 0)
            if got <= 0 { break }
            received += buffer[..<got]
        }
        let response: ControlResponse
        if let line = received.split(separator: UInt8(ascii: "\n")).first,
           let request = try? JSONDecoder().decode(ControlRequest.self, from: Data(line)) {  // else: answered below
            response = handler(request)
        } else {
            response = .failure("malformed request; send one JSON object per line")
        }
        // Every request gets an answer, an error included.
        reply(response, to: connection)
    }

    private func reply(_ response: ControlResponse, to connection: Int32) {
        var data: Data
        do {
            data = try JSONEncoder().encode(response)
        } catch {
            logger.error("cannot encode the answer to a control request: \(error)")
            data = Data(#"{"ok":false,"error":"the mount could not encode its answer; see its log"}"#.utf8)
        }
        data.append(UInt8(ascii: "\n"))
        _ = data.withUnsafeBytes { SocketServing.send($0, to: connection) }
    }

    /// Answers a client of another user (only root can reach a socket in a 0700 folder, or a process that was
    /// handed a descriptor) without reading its request: this mount serves its own user only.
    private func refuse(_ connection: Int32, peer: PeerCredentials?) {
        let who = peer.map { "\(UserAccounts.describe($0.uid)), pid \($0.pid)" } ?? "an unknown peer"
        let owner = UserAccounts.describe(geteuid())
        logger.warning("refused a control connection from \(who): this mount serves \(owner) only")
        reply(.failure("this mount serves \(owner) only; run the command as that user"), to: connection)
    }
}
