// What the control socket and the metrics endpoint share: accepting connections with a read timeout, and sending
// a whole answer.

import Glibc

enum SocketServing {
    /// Accepts connections on `listener` until it is closed, each with a 5 s receive timeout and a 5 s send timeout
    /// (a client that stops reading its answer), and hands each to `handle`, which closes it.
    static func acceptConnections(on listener: Int32, _ handle: (Int32) -> Void) {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            handle(connection)
        }
    }

    /// Sends all of `bytes`; stops at the first error (the peer went away).
    static func send(_ bytes: UnsafeRawBufferPointer, to connection: Int32) {
        var sent = 0
        while sent < bytes.count {
            let wrote = Glibc.send(connection, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if wrote <= 0 { return }
            sent += wrote
        }
    }
}
