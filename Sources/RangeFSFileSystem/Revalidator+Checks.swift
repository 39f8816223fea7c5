// The checks of Revalidator (Revalidator.swift): which probe runs when, and who its completion answers.
//
// Each URL has a short line of checks. The first is probing (or waits for a slot of its origin); a check asked
// for meanwhile joins it if it asks nothing more (the same entry, and no change it has not been told of), else
// waits behind it, merged with any other waiting check of the same entry. So a URL is probed once however many
// opens, ESTALE replies and offline checks ask, and a report of a change that arrived after the probe was sent
// still gets a probe of its own, as when the checks ran one by one. Its waiters are answered from the completion.
//
// Each origin (`scheme://host:port`) runs at most `probesPerOrigin` probes at once, so that 10,000 offline files do
// not make 10,000 transfers at once; the others wait for a slot of their own origin only, the checks a reader
// waits for (ESTALE, a change) ahead of the offline checks. An origin that never answers holds its own slots
// until its timeout, and nothing else.
//
// Locks: `checks` is taken alone; no probe is started and no waiter runs under it.

import Dispatch
import RangeFSCache
import RangeFSFetch

/// The checks of each URL and the probes of each origin.
struct CheckState {
    /// One check of a URL: the entry it checks, whether a fetch saw a change, and what waits for its end.
    struct Check {
        let entry: CacheEntry
        var knownChanged: Bool
        var waiters: [@Sendable () -> Void]
        /// It holds a slot of its origin (it left the origin's waiting line).
        var admitted = false
        /// Its probe was sent (or it was found to need none): it no longer takes news.
        var started = false
    }

    /// The URLs of one origin whose first check waits for a slot: urgent ones first, each kind in order. Taking
    /// the next is O(1) however many wait. A URL hurried by a reader is in both lists; the second time it comes up
    /// it is skipped (it was admitted already).
    struct OriginLine {
        private var urgent: [String] = []
        private var urgentHead = 0
        private var offline: [String] = []
        private var offlineHead = 0

        var isEmpty: Bool { urgentHead == urgent.count && offlineHead == offline.count }

        mutating func append(_ url: String, urgent isUrgent: Bool) {
            if isUrgent { urgent.append(url) } else { offline.append(url) }
        }

        mutating func next() -> String? {
            if urgentHead < urgent.count { return Self.take(&urgent, &urgentHead) }
            if offlineHead < offline.count { return Self.take(&offline, &offlineHead) }
            return nil
        }

        /// Takes the URL at `head`, and drops the taken ones once they are half the list (amortised O(1)).
        private static func take(_ list: inout [String], _ head: inout Int) -> String {
            let url = list[head]
            head += 1
            if head * 2 >= list.count {
                list.removeFirst(head)
                head = 0
            }
            return url
        }
    }

    /// Per URL, its checks in order: the first is probing or waits for a slot; the others wait behind it.
    var lines: [String: [Check]] = [:]
    /// Probes running per origin.
    var running: [String: Int] = [:]
    /// Per origin, the URLs whose first check waits for a slot.
    var waiting: [String: OriginLine] = [:]
    /// What waits until no check is left (the tests' `settle`), called once the last check's waiters were.
    var idle: [@Sendable () -> Void] = []
}

extension Revalidator {
    /// Probes at once per origin; the curl engine's own cap per host is 16 connections by default.
    static let probesPerOrigin = 16

    /// Asks for a check of `entry`'s URL and calls `then` (if any) once it is done; `urgent`: a reader or a change
    /// waits for it, so it goes ahead of the offline checks of its origin. Returns at once.
    func check(_ entry: CacheEntry, knownChanged: Bool, urgent: Bool, then: (@Sendable () -> Void)?) {
        let url = entry.header.url
        let origin = LinkEstimate.origin(of: url)
        let waiters = then.map { [$0] } ?? []
        let start = checks.withLock { state -> Bool in
            guard var line = state.lines[url] else {
                state.lines[url] = [CheckState.Check(entry: entry, knownChanged: knownChanged, waiters: waiters)]
                return admit(url, origin: origin, urgent: urgent, in: &state)
            }
            defer { state.lines[url] = line }
            if line[0].entry === entry, !line[0].started || line[0].knownChanged || !knownChanged {
                // The probe in flight (or about to be sent) answers this check too.
                line[0].knownChanged = line[0].knownChanged || knownChanged
                line[0].waiters += waiters
                // An offline check waiting for a slot that a reader now waits for goes ahead of the others.
                if urgent, !line[0].admitted { state.waiting[origin, default: .init()].append(url, urgent: true) }
            } else if let index = line.indices.dropFirst().first(where: { line[$0].entry === entry }) {
                line[index].knownChanged = line[index].knownChanged || knownChanged
                line[index].waiters += waiters
            } else {
                line.append(CheckState.Check(entry: entry, knownChanged: knownChanged, waiters: waiters))
            }
            return false
        }
        if start { work.async { self.run(url) } }
    }

    /// Takes a slot of `origin` for the first check of `url` (true: start it now), or puts `url` in line for one.
    private func admit(_ url: String, origin: String, urgent: Bool, in state: inout CheckState) -> Bool {
        guard state.running[origin, default: 0] < Self.probesPerOrigin else {
            state.waiting[origin, default: .init()].append(url, urgent: urgent)
            return false
        }
        state.running[origin, default: 0] += 1
        state.lines[url]![0].admitted = true
        return true
    }

    /// Gives the free slots of `origin` to the URLs waiting for one; returns those to start.
    private func admitWaiting(of origin: String, in state: inout CheckState) -> [String] {
        var admitted: [String] = []
        while state.running[origin, default: 0] < Self.probesPerOrigin, var line = state.waiting[origin],
              let url = line.next() {
            state.waiting[origin] = line.isEmpty ? nil : line
            // Skipped: a URL hurried by a reader comes up twice, and a URL's line may be gone.
            guard state.lines[url]?[0].admitted == false else { continue }
            state.running[origin, default: 0] += 1
            state.lines[url]![0].admitted = true
            admitted.append(url)
        }
        return admitted
    }

    /// Runs the first check of `url`, which holds a slot of its origin: probes it, unless it reports a change
    /// that an earlier check already handled (the entry went stale once: nothing is left to check).
    private func run(_ url: String) {
        let check = checks.withLock { state -> CheckState.Check? in
            guard state.lines[url] != nil else { return nil }
            state.lines[url]![0].started = true
            return state.lines[url]![0]
        }
        guard let check else { return }
        if check.knownChanged && check.entry.isStale { return finish(url) }
        scheduler.fetcher.probe(url: url) { [self] result in
            // Off the fetcher's thread, which must go on receiving.
            work.async { [self] in
                apply(result.map(store.settled), to: check.entry, knownChanged: check.knownChanged) { [self] in
                    finish(url)
                }
            }
        }
    }

    /// Ends the first check of `url`: gives its slot to the next check of the URL or of its origin, starts that,
    /// and answers what waited for the check. Every check that was asked for is answered here once.
    private func finish(_ url: String) {
        let origin = LinkEstimate.origin(of: url)
        typealias Ended = (waiters: [@Sendable () -> Void], next: [String], idle: [@Sendable () -> Void])
        let ended = checks.withLock { state -> Ended? in
            guard var line = state.lines[url] else { return nil }
            let done = line.removeFirst()
            state.running[origin, default: 1] -= 1
            var next: [String] = []
            if line.isEmpty {
                state.lines[url] = nil
            } else {
                state.lines[url] = line
                // The check behind it reports a change or waits for a reader: it goes first.
                if admit(url, origin: origin, urgent: true, in: &state) { next.append(url) }
            }
            next += admitWaiting(of: origin, in: &state)
            if state.running[origin] == 0 { state.running[origin] = nil }
            var idle: [@Sendable () -> Void] = []
            if state.lines.isEmpty { swap(&idle, &state.idle) }
            return (done.waiters, next, idle)
        }
        guard let ended else { return }
        for url in ended.next { work.async { self.run(url) } }
        for waiter in ended.waiters + ended.idle { waiter() }
    }
}
