// What the control socket, the metrics endpoint and the web page share besides their accept loop (AcceptLoop.swift):
// a TCP listener, and sending a whole answer.

import Glibc

enum SocketServing {
    /// Sends all of `bytes`; stops at the first error (the peer went away) and returns false.
    @discardableResult
    static func send(_ bytes: UnsafeRawBufferPointer, to connection: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let wrote = Glibc.send(connection, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if wrote < 0 && errno == EINTR { continue }
            if wrote <= 0 { return false }
            sent += wrote
        }
        return true
    }

    /// A TCP socket listening on `address:port` (port 0: one the kernel picks), and the port it got; or the reason
    /// it cannot listen (strerror's text).
    static func listenTCP(address: String, port: UInt16) -> Result<(listener: Int32, port: UInt16), ListenFailure> {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { return .failure(ListenFailure(reason: String(cString: strerror(errno)))) }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        inet_pton(AF_INET, address, &socketAddress.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound, listen(listener, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            return .failure(ListenFailure(reason: reason))
        }
        return .success((listener, UInt16(bigEndian: socketAddress.sin_port)))
    }

    /// Why a TCP listener could not be made.
    struct ListenFailure: Error {
        let reason: String
    }
}
