// Trees walked ahead (issue 36). `ls -lR`, `find` and `du` read a tree one directory after another, and each
// directory they reach costs its listing's round trip: 21 directories were 21 round trips, 3.3 s at 150 ms. A
// listing names the subdirectories the reader reaches next, so they are listed in the background while the reader
// is still busy with what it has, and the walk costs a few round trips.
//
// What starts a walk: a reader's readdir of a directory (its first page), never a lookup, a mount or a listing
// alone, so a tree nobody reads is never crawled. The walk from directory D lists, in name order (the order
// `ls -R` and `find` go), D's subdirectories and theirs (`walkAheadLevels` levels below D), then the few
// subdirectories that follow D in its parent (`walkAheadSiblings`), which the reader reaches after D's subtree:
// as the reader moves on, the window moves with it. One walk starts at most `walkAheadDirectories` listings, so
// `ls` of the root of a tree of thousands of directories costs that many requests, not thousands. Directories
// listed within `--dir-cache-time`, being listed, or whose listing ahead failed are skipped.
//
// Readers first. At most `walkAheadListings` listings ahead are in flight for the whole mount (three quarters of
// the connections per host, 12 of 16 by default: a reader's listing or read always finds a connection; 12 rather
// than 8 made `ls -lR` of 20 directories 4 round trips instead of 5 at 150 ms); the rest wait in a queue of at
// most `walkAheadQueueLimit`, newest walk first, since its directories are the ones the reader reaches next. A
// reader's listing never waits in that queue: one of a queued directory starts at once (and leaves the queue),
// and one of a directory listed ahead right now joins that listing, as concurrent readers share one.
//
// A listing read ahead is one like any other: saved for offline use, applied to the catalog, fresh for
// `--dir-cache-time`. A failure that no reader waited for logs at debug level, is not tried ahead again until a
// reader lists the directory, and leaves no error behind: the reader's own listing tries again (no EIO from a
// walk the user never asked for). A reader who joined a listing ahead that failed gets a listing of its own too.
// A server that cannot be reached ends the walks: their queue is dropped. A server that answers a listing ahead
// "busy" (503, 429: lighttpd refuses a second listing in progress) ends walking ahead for the mount, with one log
// line, and a reader's listing it refused meanwhile is tried once more when no listing ahead is in flight.

import Logging
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension DirectoryService {
    /// How many levels below a directory a reader reads the walk lists: its subdirectories and theirs.
    static let walkAheadLevels = 2
    /// How many of the subdirectories that follow a directory a reader reads in its parent the walk lists.
    static let walkAheadSiblings = 8
    /// The most listings one walk starts.
    static let walkAheadDirectories = 32
    /// The most listings waiting to start ahead, for the whole mount.
    static let walkAheadQueueLimit = 256
    /// How many names a walk looks at in one directory to find its subdirectories.
    static let walkAheadScan = 16_384

    /// What a listing ahead belongs to: its walk, and how many levels below it the walk goes on.
    struct WalkStep: Equatable {
        var walk: UInt64
        var levels: Int
    }

    /// The walks ahead of the whole mount.
    struct WalkAhead {
        /// Directories waiting to be listed ahead, the first to go first.
        var queue: [(inode: UInt64, step: WalkStep)] = []
        /// Listings ahead running now.
        var inFlight = 0
        /// How many more listings each walk may start.
        var budgets: [UInt64: Int] = [:]
        /// The walks of listings ahead that ended and have not gone on below yet (from `finish` to
        /// `listingEnded`, two takings of the lock): alive meanwhile, though neither queued nor listed.
        var ending: [UInt64: Int] = [:]
        var nextWalk: UInt64 = 1
        /// Directories whose listing ahead failed: not listed ahead again before a reader lists them.
        var failed: Set<UInt64> = []
        /// Whether a listing ahead has been made on this mount, and whether the server's "busy" ended walking.
        var started = false
        var stopped = false
        /// Readers' listings to try again once no listing ahead is in flight.
        var drained: [UInt64] = []
    }

    /// A reader read directory `inode` (listed now): lists ahead what the reader reaches next.
    func walkAhead(from inode: UInt64) {
        guard settings.walkAheadListings > 0, !state.withLock({ $0.walkAhead.stopped }),
              let directory = catalog.directory(inode: inode) else { return }
        let now = MonotonicClock.seconds()
        var planned: [(inode: UInt64, levels: Int)] = []
        var visited: Set<UInt64> = [inode]
        /// The subdirectories of `parent` that need a listing, breadth first, `levels` levels down, and below those
        /// that are listed already and fresh (a walk from a directory read before goes on where it stopped).
        func plan(below parent: UInt64, levels: Int) {
            var level = [parent]
            var remaining = levels
            while remaining > 0, !level.isEmpty, planned.count < Self.walkAheadDirectories {
                var next: [UInt64] = []
                for folder in level {
                    for child in catalog.subdirectories(of: folder, limit: Self.walkAheadDirectories * 4,
                                                        scan: Self.walkAheadScan)
                    where visited.insert(child.inode).inserted {
                        if isFresh(child, now: now) {
                            next.append(child.inode)
                        } else {
                            planned.append((child.inode, remaining - 1))
                        }
                        if planned.count >= Self.walkAheadDirectories { return }
                    }
                }
                level = next
                remaining -= 1
            }
        }
        plan(below: inode, levels: Self.walkAheadLevels)
        if directory.parent != inode {
            for sibling in catalog.subdirectories(of: directory.parent, after: directory.name,
                                                  limit: Self.walkAheadSiblings, scan: Self.walkAheadScan)
            where visited.insert(sibling.inode).inserted && !isFresh(sibling, now: now) {
                planned.append((sibling.inode, 0))
            }
        }
        guard !planned.isEmpty else { return }
        let start = state.withLock { state -> [UInt64] in
            let walk = state.walkAhead.nextWalk
            state.walkAhead.nextWalk += 1
            var budget = Self.walkAheadDirectories
            var first: [(inode: UInt64, step: WalkStep)] = []
            for (candidate, levels) in planned where budget > 0 {
                let step = WalkStep(walk: walk, levels: levels)
                if let queued = state.walkAhead.queue.firstIndex(where: { $0.inode == candidate }) {
                    state.walkAhead.queue.remove(at: queued)  // wanted sooner now: it moves up with this walk
                } else if !mayListAhead(candidate, in: state, now: now) {
                    continue
                }
                first.append((candidate, step))
                budget -= 1
            }
            state.walkAhead.budgets[walk] = budget
            state.walkAhead.queue.insert(contentsOf: first, at: 0)
            trimWalks(&state)
            return takeStartable(&state)
        }
        for inode in start { listAhead(inode) }
    }

    /// Whether directory `directory`'s listing was read within `directoryCacheTime`.
    private func isFresh(_ directory: CatalogDirectory, now: Double) -> Bool {
        guard directory.listed else { return false }
        guard let listedAt = directory.listedAt else { return true }
        return now - listedAt <= settings.directoryCacheTime.seconds
    }

    /// Whether directory `inode` may be queued to be listed ahead: it has a URL, nobody lists it now, and neither
    /// a reader's listing of it nor one ahead failed lately.
    private func mayListAhead(_ inode: UInt64, in state: State, now: Double) -> Bool {
        guard catalog.directory(inode: inode)?.url != nil, !state.walkAhead.failed.contains(inode) else { return false }
        guard let listing = state.listings[inode] else { return true }
        if listing.running { return false }
        if let failedAt = listing.failedAt, now - failedAt < Self.listingRetryAfter { return false }
        return true
    }

    /// Takes from the queue the directories that may start now, within `walkAheadListings`, and marks them listed.
    private func takeStartable(_ state: inout State) -> [UInt64] {
        var start: [UInt64] = []
        let now = MonotonicClock.seconds()
        while !state.walkAhead.stopped, state.walkAhead.inFlight < settings.walkAheadListings,
              !state.walkAhead.queue.isEmpty {
            let (inode, step) = state.walkAhead.queue.removeFirst()
            // Listed by a reader while it waited, or failed since: nothing to do.
            guard mayListAhead(inode, in: state, now: now),
                  let directory = catalog.directory(inode: inode), !isFresh(directory, now: now) else { continue }
            var listing = state.listings[inode] ?? Listing()
            listing.running = true
            listing.ahead = step
            state.listings[inode] = listing
            state.walkAhead.inFlight += 1
            state.walkAhead.started = true
            start.append(inode)
        }
        return start
    }

    /// Keeps the queue within its limit (the oldest walks' directories go) and forgets walks with nothing left.
    private func trimWalks(_ state: inout State) {
        if state.walkAhead.queue.count > Self.walkAheadQueueLimit {
            state.walkAhead.queue.removeLast(state.walkAhead.queue.count - Self.walkAheadQueueLimit)
        }
        var alive = Set(state.walkAhead.queue.map(\.step.walk)).union(state.walkAhead.ending.keys)
        for listing in state.listings.values { if let step = listing.ahead { alive.insert(step.walk) } }
        state.walkAhead.budgets = state.walkAhead.budgets.filter { alive.contains($0.key) && $0.value > 0 }
    }

    private func listAhead(_ inode: UInt64) {
        guard let url = catalog.directory(inode: inode)?.url else {
            // Removed from the tree meanwhile (a refresh of its parent): readers who joined the listing are
            // answered (the directory is gone), its place goes back, and the next listings start.
            let (listing, start, drained) = state.withLock { state -> (Listing?, [UInt64], [UInt64]) in
                let listing = state.listings.removeValue(forKey: inode)
                state.walkAhead.inFlight -= 1
                return (listing, takeStartable(&state), takeDrained(&state))
            }
            for waiter in listing?.waiters ?? [] { waiter() }
            for report in listing?.reports ?? [] { report(.listed) }
            for inode in start { listAhead(inode) }
            for inode in drained { listAgain(inode) }
            return
        }
        list(inode, url: url)
    }

    /// The listing of directory `inode` ended (`step` set if it was one ahead; `quiet`: no reader waited for it):
    /// the walk goes on below it, and the next queued listings start.
    func listingEnded(_ inode: UInt64, step: WalkStep?, quiet: Bool, outcome: ListingOutcome, failure: FetchError?) {
        let now = MonotonicClock.seconds()
        var below: [CatalogDirectory] = []
        if let step, step.levels > 0, case .listed = outcome {
            below = catalog.subdirectories(of: inode, limit: Self.walkAheadDirectories, scan: Self.walkAheadScan)
        }
        let (start, drained, stopped) = state.withLock { state -> ([UInt64], [UInt64], Bool) in
            if let step {
                let left = state.walkAhead.ending[step.walk, default: 0] - 1
                assert(left >= 0, "a listing ahead went on below without having ended (`finish` counts it)")
                state.walkAhead.ending[step.walk] = left > 0 ? left : nil
            }
            let stopped = step.map { _ in endAhead(inode, failure: failure, in: &state) } ?? false
            switch outcome {
            case .failed where step != nil && quiet:
                state.walkAhead.failed.insert(inode)
            case .listed, .kept:
                state.walkAhead.failed.remove(inode)
            case .failed:
                break
            }
            if let step, var budget = state.walkAhead.budgets[step.walk] {
                var more: [(inode: UInt64, step: WalkStep)] = []
                for child in below where budget > 0 && !isFresh(child, now: now)
                    && !state.walkAhead.queue.contains(where: { $0.inode == child.inode })
                    && mayListAhead(child.inode, in: state, now: now) {
                    more.append((child.inode, WalkStep(walk: step.walk, levels: step.levels - 1)))
                    budget -= 1
                }
                state.walkAhead.budgets[step.walk] = budget
                state.walkAhead.queue.append(contentsOf: more)
            }
            trimWalks(&state)
            return (takeStartable(&state), takeDrained(&state), stopped)
        }
        if stopped, let failure { reportBusy(inode, failure) }
        for inode in start { listAhead(inode) }
        for inode in drained { listAgain(inode) }
    }

    /// Says once that the server of directory `inode` answered "busy" to a listing ahead, which ended the walks.
    private func reportBusy(_ inode: UInt64, _ failure: FetchError) {
        let shown = Redaction.redact(catalog.directory(inode: inode)?.url ?? "")
        logger.info("\(shown) answered \(failure.userMessage) to a listing made ahead: this server lists one directory at a time; no more directories are listed ahead on this mount")
    }

    /// Books the end of the listing ahead of `inode`: one fewer in flight, and a server that answers it "busy"
    /// (503, 429: lighttpd refuses a second listing in progress) ends walking ahead for the mount. Whether it did.
    private func endAhead(_ inode: UInt64, failure: FetchError?, in state: inout State) -> Bool {
        state.walkAhead.inFlight -= 1
        guard let failure, Self.isBusy(failure) || failure.isOriginUnreachable else { return false }
        state.walkAhead.queue.removeAll()
        guard Self.isBusy(failure), !state.walkAhead.stopped else { return false }
        state.walkAhead.stopped = true
        return true
    }

    /// Whether `error` is a server's "too busy now" (503, 429), which a second try may not get.
    static func isBusy(_ error: FetchError) -> Bool {
        switch error {
        case .httpStatus(let status), .proxyStatus(let status, _): status == 503 || status == 429
        default: false
        }
    }

    /// A failed listing that readers wait for is tried once more, as theirs, when the walk ahead may be why it
    /// failed: it was a listing ahead (which a reader joined), or the server answered "busy" on a mount that lists
    /// ahead. A "busy" one waits until no listing ahead is in flight. Whether it is tried again (the outcome then
    /// comes from that listing).
    func listAgainForReaders(_ inode: UInt64, url: String, after result: Result<[UInt8], FetchError>) -> Bool {
        guard case .failure(let error) = result, !error.isGone else { return false }
        enum Next { case no, now, whenDrained }
        let (next, start, drained, stopped) = state.withLock { state -> (Next, [UInt64], [UInt64], Bool) in
            guard var listing = state.listings[inode], !listing.again,
                  !listing.waiters.isEmpty || !listing.reports.isEmpty else { return (.no, [], [], false) }
            let wasAhead = listing.ahead != nil
            guard wasAhead || (Self.isBusy(error) && state.walkAhead.started) else { return (.no, [], [], false) }
            listing.again = true
            listing.ahead = nil
            state.listings[inode] = listing
            let stopped = wasAhead && endAhead(inode, failure: error, in: &state)
            guard Self.isBusy(error), state.walkAhead.inFlight > 0 else {
                return (.now, takeStartable(&state), takeDrained(&state), stopped)
            }
            state.walkAhead.drained.append(inode)
            return (.whenDrained, takeStartable(&state), [], stopped)
        }
        if stopped { reportBusy(inode, error) }
        for inode in start { listAhead(inode) }
        for inode in drained { listAgain(inode) }
        switch next {
        case .no: return false
        case .now: list(inode, url: url)
        case .whenDrained: break
        }
        return true
    }

    /// Lists directory `inode` again for the readers that wait for it (it left the tree: they are answered).
    private func listAgain(_ inode: UInt64) {
        if let url = catalog.directory(inode: inode)?.url { return list(inode, url: url) }
        let waiters = state.withLock { $0.listings.removeValue(forKey: inode)?.waiters ?? [] }
        for waiter in waiters { waiter() }
    }

    /// The readers' listings that wait for the listings ahead to end, once none is in flight.
    private func takeDrained(_ state: inout State) -> [UInt64] {
        guard state.walkAhead.inFlight == 0, !state.walkAhead.drained.isEmpty else { return [] }
        defer { state.walkAhead.drained.removeAll() }
        return state.walkAhead.drained
    }

    /// A reader lists directory `inode` itself: it leaves the queue of listings ahead.
    func leaveWalkQueue(_ inode: UInt64, in state: inout State) {
        if let queued = state.walkAhead.queue.firstIndex(where: { $0.inode == inode }) {
            state.walkAhead.queue.remove(at: queued)
        }
    }
}
