// The accept loop the control socket and the metrics endpoint share. One thread accepts; each connection gets a
// 5 s receive timeout and a 5 s send timeout (a client that stops sending its request or reading its answer holds
// its slot that long at most), and is answered on a concurrent queue, at most `concurrency` at once: more wait in
// the socket's backlog. A slow answer (an `add` waiting for its server, a hanging scraper) holds up no other.

import Dispatch
import Glibc
import RangeFSPlatform

/// Accepts connections on a listening socket and answers each on a queue, a bounded number at once, until `stop`.
final class AcceptLoop: @unchecked Sendable {
    // @unchecked Sendable: every field is immutable after init; the semaphore and the queue are thread-safe.
    private let listener: Int32
    private let name: String
    private let slots: DispatchSemaphore
    private let answering: DispatchQueue

    /// Takes over `listener` (bound and listening); `name` names the accept thread and the answering queue.
    init(listener: Int32, name: String, concurrency: Int) {
        self.listener = listener
        self.name = name
        slots = DispatchSemaphore(value: concurrency)
        answering = DispatchQueue(label: name.replacing("-", with: "."), attributes: .concurrent)
    }

    /// Starts the accept thread: `answer` runs for each connection on the queue, which closes it afterwards.
    func start(answer: @escaping @Sendable (Int32) -> Void) {
        startThread(name: name) { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 {
                    if errno == EINTR { continue }
                    return  // the listener was closed: `stop`
                }
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                slots.wait()
                answering.async { [self] in
                    answer(connection)
                    close(connection)
                    slots.signal()
                }
            }
        }
    }

    /// Stops accepting: the accept thread returns, and answers under way finish.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
