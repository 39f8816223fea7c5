// How many probes of listed files run at once against one server (issue 45, case 12). `ls -l` of a folder with
// no sizes in its listing probes 32 of its files at once (DirectoryService+Probes.swift); a server with a small
// listen backlog (`python3 -m http.server`: 5, and a new connection per request, as HTTP/1.0) drops the connection
// attempts past it, and TCP sends each dropped SYN again only after a second: `ls -lR` of 3,007 files took 120 s
// there, 15 s with rclone. So each server starts with a few probes at once and takes half as many more after a
// round of quick answers (as many as it has probes at once), at most once a second. A probe slower than the
// server's fastest by most of a second waited for a dropped attempt (or the server is overloaded): the window
// halves, and never grows past that again on this mount. Why once a second: a dropped attempt shows only when it
// is sent again, a second later. Growing one per quick answer (slow start) reached 32 within that second, and 500
// probes of http.server overflowed its backlog 20 times; one per round of answers, 4 times for 400. A server that
// keeps up (nginx) goes 4, 6, 9, 13, 19 probes at once over four seconds (libcurl's 16 per host bound them).

import RangeFSFetch
import RangeFSSystem

/// The probes in flight per server, and those waiting for a slot, in order.
final class ProbeWindows: Sendable {
    /// Probes at once on a server not yet heard from, and the most ever.
    static let first = 4
    static let widest = 32
    /// A probe this much slower than its server's fastest waited for a connection attempt sent again (1 s).
    static let dropDelay = 0.8
    /// Seconds between two widenings of one server's window (long enough for a dropped attempt to show).
    private let growthInterval: Double

    init(growthInterval: Double = 1.0) {
        self.growthInterval = growthInterval
    }

    typealias Probe = @Sendable (_ done: @escaping @Sendable () -> Void) -> Void

    private struct Server {
        var width = ProbeWindows.first
        var ceiling = ProbeWindows.widest
        var inFlight = 0
        /// Quick answers since the window last grew.
        var quickAnswers = 0
        var waiting: [Probe] = []
        /// The quickest probe of this server (seconds), and when the window last grew and was last halved
        /// (monotonic seconds).
        var fastest = Double.infinity
        var grewAt = -Double.infinity
        var narrowedAt = -Double.infinity
    }

    private let servers = LockedBox<[String: Server]>([:])

    /// Runs `probe` of `url` once its server has a free slot; `probe` calls `done` when its answer came.
    func run(_ url: String, _ probe: @escaping Probe) {
        let key = URLOrigin.of(url) ?? url
        let now = servers.withLock { servers -> Bool in
            var server = servers[key, default: Server()]
            defer { servers[key] = server }
            guard server.inFlight < server.width else {
                server.waiting.append(probe)
                return false
            }
            server.inFlight += 1
            return true
        }
        if now { start(probe, of: key) }
    }

    /// The width of `url`'s server now (for tests).
    func width(of url: String) -> Int {
        servers.withLock { $0[URLOrigin.of(url) ?? url]?.width ?? Self.first }
    }

    private func start(_ probe: Probe, of key: String) {
        let began = MonotonicClock.seconds()
        probe { [self] in finished(key, began: began) }
    }

    private func finished(_ key: String, began: Double) {
        let now = MonotonicClock.seconds()
        let elapsed = now - began
        let next = servers.withLock { servers -> [Probe] in
            guard var server = servers[key] else { return [] }
            defer { servers[key] = server }
            server.inFlight -= 1
            server.fastest = min(server.fastest, elapsed)
            if elapsed > server.fastest + Self.dropDelay {
                // Once per burst: the probes that began before the last halving saw the old width.
                if began > server.narrowedAt {
                    server.width = max(2, server.width / 2)
                    server.ceiling = server.width
                    server.narrowedAt = now
                }
            } else if server.width < server.ceiling {
                server.quickAnswers += 1
                if server.quickAnswers >= server.width, now - server.grewAt >= growthInterval {
                    server.width = min(server.ceiling, server.width + max(1, server.width / 2))
                    server.quickAnswers = 0
                    server.grewAt = now
                }
            }
            var next: [Probe] = []
            while server.inFlight < server.width, !server.waiting.isEmpty {
                next.append(server.waiting.removeFirst())
                server.inFlight += 1
            }
            return next
        }
        for probe in next { start(probe, of: key) }
    }
}
