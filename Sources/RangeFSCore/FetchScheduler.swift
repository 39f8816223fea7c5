// Turns claimed runs of blocks into Range requests and decides when each starts.
//
// Priorities (DESIGN.md §5): demand > readahead > fill. Demand requests start at once, whatever else runs; the
// others wait in a queue while `maxTransfers` are running. When a reader needs blocks that a queued request
// already claimed, `promote` starts that request now, so demand never waits behind readahead or fill.
// Runs are cut into requests of at most `maxRequestBytes`, so one long run becomes parallel connections.

import Dispatch
import Logging
import Synchronization

/// How urgently blocks are wanted.
public enum FetchPriority: Int, Comparable, Sendable {
    case fill = 0
    case readahead = 1
    case demand = 2

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Tunables for fetching.
public struct FetchPolicy: Sendable {
    /// The largest single Range request.
    public var maxRequestBytes: UInt64 = 8 << 20
    /// Transfers running at once before readahead and fill wait (demand always starts).
    public var maxTransfers = 8
    /// Attempts per request for transient failures; each retry resumes at the first byte not yet received.
    public var attempts = 4
    /// The first retry's delay; it doubles each time.
    public var retryDelay: Duration = .milliseconds(200)

    public init() {}
}

/// Schedules the transfers that fill cache entries.
public final class FetchScheduler: Sendable {
    public let policy: FetchPolicy
    let fetcher: RangeFetching
    let store: CacheStore
    let logger: Logger
    private let state = Mutex(State())
    /// Told when a fetch finds that the remote file changed; RangeFS re-probes it.
    private let changeObserver = LockedBox<(@Sendable (CacheEntry) -> Void)?>(nil)

    private struct Pending {
        let sequence: UInt64
        var priority: FetchPriority
        let entry: CacheEntry
        let url: String
        let blocks: Range<Int>
    }

    private struct State {
        var running = 0
        var nextSequence: UInt64 = 0
        var queue: [Pending] = []
    }

    public init(fetcher: RangeFetching, store: CacheStore, policy: FetchPolicy = FetchPolicy(), logger: Logger) {
        self.fetcher = fetcher
        self.store = store
        self.policy = policy
        self.logger = logger
    }

    /// Fetches `runs` of `entry` (already claimed by the caller) from `url`.
    public func fetch(_ entry: CacheEntry, url: String, runs: [Range<Int>], priority: FetchPriority) {
        if entry.isRangeless {
            // Range requests would only get the whole file again: one stream brings every block.
            for run in runs { entry.releaseClaims(run) }
            return startStream(entry, url: url)
        }
        let blocksPerRequest = max(1, Int(policy.maxRequestBytes / UInt64(entry.blockSize)))
        let toStart = state.withLock { state -> [Pending] in
            for run in runs {
                for start in stride(from: run.lowerBound, to: run.upperBound, by: blocksPerRequest) {
                    let blocks = start..<min(run.upperBound, start + blocksPerRequest)
                    state.queue.append(Pending(sequence: state.nextSequence, priority: priority, entry: entry,
                                               url: url, blocks: blocks))
                    state.nextSequence += 1
                }
            }
            return Self.takeStartable(&state, limit: policy.maxTransfers)
        }
        toStart.forEach(start)
    }

    /// Starts at once any queued request of `entry` that overlaps `blocks`: a reader is waiting for it.
    public func promote(_ entry: CacheEntry, blocks: Range<Int>) {
        let toStart = state.withLock { state -> [Pending] in
            for index in state.queue.indices
            where state.queue[index].entry === entry && state.queue[index].blocks.overlaps(blocks) {
                state.queue[index].priority = .demand
            }
            return Self.takeStartable(&state, limit: policy.maxTransfers)
        }
        toStart.forEach(start)
    }

    /// Streams the whole of `entry` from byte 0 for a server that ignores Range, unless a stream already runs.
    func startStream(_ entry: CacheEntry, url: String) {
        guard entry.beginStream() else { return }
        state.withLock { $0.running += 1 }
        let sink = BlockSink(entry: entry, url: url, blocks: 0..<entry.blockCount, wholeFile: true, scheduler: self)
        sink.startAttempt()
    }

    /// Sets who is told when a fetch finds the remote file changed.
    public func observeRemoteChanges(_ observer: @escaping @Sendable (CacheEntry) -> Void) {
        changeObserver.withLock { $0 = observer }
    }

    func reportRemoteChange(_ entry: CacheEntry) {
        changeObserver.withLock { $0 }?(entry)
    }

    /// How many transfers are running and queued, for status and tests.
    public var load: (running: Int, queued: Int) { state.withLock { ($0.running, $0.queue.count) } }

    private static func takeStartable(_ state: inout State, limit: Int) -> [Pending] {
        state.queue.sort { ($0.priority, -Int64($0.sequence)) > ($1.priority, -Int64($1.sequence)) }
        var started: [Pending] = []
        while let next = state.queue.first, next.priority == .demand || state.running < limit {
            state.queue.removeFirst()
            state.running += 1
            started.append(next)
        }
        return started
    }

    private func start(_ pending: Pending) {
        let sink = BlockSink(entry: pending.entry, url: pending.url, blocks: pending.blocks, scheduler: self)
        sink.startAttempt()
    }

    /// Called by a sink once its blocks are all stored or abandoned.
    func transferFinished(_ entry: CacheEntry) {
        let toStart = state.withLock { state -> [Pending] in
            state.running -= 1
            return Self.takeStartable(&state, limit: policy.maxTransfers)
        }
        toStart.forEach(start)
    }

    /// Runs `body` after `delay` on a background queue, for retries.
    func after(_ delay: Duration, _ body: @escaping @Sendable () -> Void) {
        let nanoseconds = Int(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds), execute: body)
    }
}
