// What the control socket and the metrics endpoint share besides their accept loop (AcceptLoop.swift): sending a
// whole answer.

import Glibc

enum SocketServing {
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
