// Folder Fetch/: turning wanted blocks into HTTP requests (scheduling, retries, sinks, probes' parsing, streams of
// unknown length). It may use Cache/ through BlockStore, and System/; never FileSystem/.
//
// Turns claimed runs of blocks into Range requests and decides when each starts.
//
// Priorities (DESIGN.md §5): demand > readahead > fill.
//   - Demand requests start at once, whatever else runs. When a reader needs blocks that a queued request already
//     claimed, `promote` starts that request now, so demand never waits behind readahead or fill.
//   - Readahead and fill wait in a queue while `maxTransfers` run in total or `connectionsPerFile` run for the
//     file, so one long sequential read becomes that many parallel connections and no file starves the others.
//   - Fill (completing files in the background) runs at most `fillTransfers` at once, and is rate-limited by
//     `fillBytesPerSecond`. While a reader waits on a demand transfer, and for `fillResumeDelay` after the last
//     one, fill starts nothing new and its running transfers are paused (the fetcher stops receiving on them), so
//     readers get the link, the disk and the CPU. Readers that come in bursts (a player seeking, a scan) thus keep
//     fill out of the way for the whole burst, not just for each read. Nor does fill start anything while
//     readahead runs: a sequential reader gets the connections, and fill takes over when it stops. Fill work is
//     generated lazily: when there is room, the next missing run of a file being filled is claimed, one segment
//     at a time. Under a cache cap the file's store may answer that it has no room (a file larger than the cap,
//     or a pass that would have to evict what it or a reader used since it began): the fill of that file ends.
// Runs are cut into requests of at most `segmentBytes`.
//
// Locks: the scheduler's state is taken before a block store's (claiming fill work); docs/internals.md has the order.

import Dispatch
import Logging
import RangeFSCache
import RangeFSSystem

/// Schedules the transfers that fill cache entries.
public final class FetchScheduler: Sendable {
    package let policy: FetchPolicy
    /// Readahead and fill go here; so do probes.
    package let fetcher: RangeFetching
    /// Demand goes here, on its own thread and connections, so a reader's bytes never queue behind background
    /// data the other fetcher is still processing.
    let demandFetcher: RangeFetching
    let logger: Logger
    /// The mirrors of files that have some: each request of such a file asks one of them (see `MirrorSet`).
    package let mirrors = MirrorTable()
    /// Mirror probes wait here for one of 64 slots, as the mount's own probes do (`probeAll`): a library of
    /// 10,000 mirrored files must not make 10,000 transfers at once. The queue waits, never a caller.
    let mirrorProbes = DispatchQueue(label: "rangefs.mirror-probes")
    let mirrorProbeSlots = DispatchSemaphore(value: 64)
    private let state = LockedBox(State())
    /// The engines handed to each transfer at its birth.
    private var engines: TransferEngines { TransferEngines(demand: demandFetcher, background: fetcher) }
    /// What the scheduler reports, fixed at its birth.
    let events: Events
    /// The mount's counters: each transfer's bytes and failures are added here once its attempt ends.
    let metrics: Metrics

    /// What the scheduler reports to whoever composes it, given to `init` (never set later).
    package struct Events: Sendable {
        package init(reports: EventQueue<EntryEvent>? = nil) { self.reports = reports }
        /// Where a fetch reports that an entry's remote file changed (`EntryEvent.remoteChanged`; readers failed already).
        package var reports: EventQueue<EntryEvent>?
        /// The scheduler's lock was taken (`locked`): an observer for the test that a demand read takes it once.
        /// A mount sets none.
        package var lockTaken: (@Sendable () -> Void)?
    }

    private struct Pending {
        let sequence: UInt64
        var priority: FetchPriority
        let entry: any BlockStore
        let url: String
        let blocks: Range<Int>
        /// The whole file without Range, for servers that ignore it.
        var wholeFile = false
        /// One attempt instead of the policy's retries (see `fetch`).
        var singleAttempt = false
    }

    /// A file being completed in the background, and where its next fill segment starts looking.
    private struct FillJob {
        let entry: any BlockStore
        let url: String
        let work: WorkHold  // work for its entry while the job is queued: the store keeps the entry open
        var cursor = 0
        /// Whether a segment was claimed yet: the first claim begins the entry's fill pass (under a cache cap, a
        /// pass never evicts what was used since it began).
        var claimedBefore = false
    }

    private struct State {
        var nextSequence: UInt64 = 0
        var queue: [Pending] = []
        var running = 0
        var runningDemand = 0
        var runningFill = 0
        var runningReadahead = 0
        var runningPerEntry: [ObjectIdentifier: Int] = [:]
        var fillJobs: [FillJob] = []
        var nextFillJob = 0
        /// Fill transfers running now, so a reader can promote the one that holds its blocks.
        var runningFillSinks: [ObjectIdentifier: BlockSink] = [:]
        /// Fill is held back (demand ran recently); `holdGeneration` tells a stale resume timer from the current one.
        var fillHeld = false
        var holdGeneration = 0
    }

    package init(fetcher: RangeFetching, demandFetcher: RangeFetching? = nil, policy: FetchPolicy = FetchPolicy(),
                 events: Events = Events(), metrics: Metrics = Metrics(), logger: Logger) {
        self.events = events
        self.metrics = metrics
        self.fetcher = fetcher
        self.demandFetcher = demandFetcher ?? fetcher
        self.policy = policy
        self.logger = logger
    }

    /// Runs `body` with the state locked, telling the observer, if any (`Events.lockTaken`).
    private func locked<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
        events.lockTaken?()
        return state.withLock(body)
    }

    /// Changes the state under the lock, then starts the work `change` returns. Background transfers are paused
    /// when demand starts, and resumed when the last demand transfer ends.
    private func schedule(_ change: (inout State) -> [Pending]) {
        let (toStart, paused, resumeGeneration) = locked { state -> ([Pending], Bool, Int?) in
            let before = state.runningDemand
            var toStart = change(&state)
            let after = state.runningDemand
            if before == 0 && after > 0 && !state.fillHeld {
                state.fillHeld = true
                state.holdGeneration += 1
                return (toStart, true, nil)
            }
            if before > 0 && after == 0 {
                state.holdGeneration += 1
                toStart += takeStartable(&state)
                return (toStart, false, state.holdGeneration)
            }
            if after > 0 && state.fillHeld { state.holdGeneration += 1 }  // demand again: cancel a pending resume
            return (toStart, false, nil)
        }
        if paused { fetcher.pauseBackground(true) }
        if let resumeGeneration { resumeFill(after: policy.fillResumeDelay, generation: resumeGeneration) }
        toStart.forEach(start)
    }

    /// Lets fill run again once demand stayed idle for `delay`.
    private func resumeFill(after delay: Duration, generation: Int) {
        after(delay) { [self] in
            var resumed = false
            schedule { state in
                guard state.fillHeld, state.holdGeneration == generation, state.runningDemand == 0 else { return [] }
                state.fillHeld = false
                resumed = true
                return takeStartable(&state)
            }
            if resumed { fetcher.pauseBackground(false) }
        }
    }

    /// Fetches `runs` of `entry` (already claimed by the caller) from `url`.
    ///
    /// `singleAttempt` makes each request one attempt, without the policy's retries: for blocks whose fetch just
    /// failed after all of them, asked for again at once (the kernel's own retry of a failed READ), so that a
    /// server that does not answer costs one more timeout, not a second round of retries.
    package func fetch(_ entry: any BlockStore, url: String, runs: [Range<Int>], priority: FetchPriority,
                      singleAttempt: Bool = false) {
        if entry.isRangeless {
            // Range requests would only get the whole file again: one stream brings every block.
            for run in runs { entry.releaseClaims(run) }
            return startStream(entry, url: url)
        }
        schedule { state in
            enqueue(runs, of: entry, url: url, priority: priority, singleAttempt: singleAttempt, in: &state)
            return takeStartable(&state)
        }
    }

    /// Queues `runs` of `entry` in requests of a segment at most.
    private func enqueue(_ runs: [Range<Int>], of entry: any BlockStore, url: String, priority: FetchPriority,
                         singleAttempt: Bool, in state: inout State) {
        for run in runs {
            for blocks in segments(of: run, in: entry, url: url) {
                state.queue.append(Pending(sequence: state.nextSequence, priority: priority, entry: entry,
                                           url: url, blocks: blocks, singleAttempt: singleAttempt))
                state.nextSequence += 1
            }
        }
    }

    /// Makes sure `blocks` of `store` become readable, for a reader: the ones nobody fetches yet are claimed and
    /// fetched at demand priority, and the requests that already hold the others are promoted, so that the reader
    /// never waits behind readahead or fill. The one claim-fetch-promote path of every read, in one round trip of
    /// the scheduler's lock. Returns what the store found; on `.waiting`, `then` runs once every block arrived or
    /// one failed. `singleAttempt` as for `fetch`.
    package func ensure(_ store: any BlockStore, url: String, blocks: Range<Int>, singleAttempt: Bool = false,
                       then: @escaping BlockWaiter) -> BlockAvailability {
        var claimed: [Range<Int>] = []
        let availability = store.request(blocks: blocks, claimed: &claimed, whenReady: then)
        guard case .waiting = availability else {
            if !claimed.isEmpty { fetch(store, url: url, runs: claimed, priority: .demand, singleAttempt: singleAttempt) }
            return availability
        }
        if store.isRangeless {
            if !claimed.isEmpty { fetch(store, url: url, runs: claimed, priority: .demand) }  // one stream
            promote(store, blocks: blocks)
            return availability
        }
        var promotedRunning = false
        schedule { state in
            enqueue(claimed, of: store, url: url, priority: .demand, singleAttempt: singleAttempt, in: &state)
            promotedRunning = promote(store, blocks: blocks, in: &state)
            return takeStartable(&state)
        }
        if promotedRunning { fetcher.pauseBackground(true) }  // wakes the fetcher to resume the promoted transfer
        return availability
    }

    /// Fetches the blocks of `blocks` that are neither readable nor being fetched, at `priority` (readahead), with
    /// nobody waiting for them.
    package func prefetch(_ store: any BlockStore, url: String, blocks: Range<Int>, priority: FetchPriority) {
        let runs = store.claim(blocks: blocks)
        if !runs.isEmpty { fetch(store, url: url, runs: runs, priority: priority) }
    }

    /// A reader waits for `blocks` of `entry`: starts at once any queued request that overlaps them, and makes a
    /// running fill transfer that holds them demand work (so it is not paused).
    func promote(_ entry: any BlockStore, blocks: Range<Int>) {
        var promotedRunning = false
        schedule { state in
            promotedRunning = promote(entry, blocks: blocks, in: &state)
            return takeStartable(&state)
        }
        if promotedRunning { fetcher.pauseBackground(true) }  // wakes the fetcher to resume the promoted transfer
    }

    /// `promote` under the lock; true when a running fill transfer became demand work.
    private func promote(_ entry: any BlockStore, blocks: Range<Int>, in state: inout State) -> Bool {
        var promotedRunning = false
        for index in state.queue.indices
        where state.queue[index].entry === entry && state.queue[index].blocks.overlaps(blocks) {
            state.queue[index].priority = .demand
        }
        for (key, sink) in state.runningFillSinks
        where sink.blockStore === entry && sink.coveredBlocks.overlaps(blocks) {
            state.runningFillSinks[key] = nil
            sink.promoteToDemand()
            state.runningFill -= 1
            state.runningDemand += 1
            promotedRunning = true
        }
        return promotedRunning
    }

    /// Completes `entry` in the background, at fill priority, whether or not it stays open.
    package func fill(_ entry: any BlockStore, url: String) {
        schedule { state in
            if !state.fillJobs.contains(where: { $0.entry === entry }) {
                state.fillJobs.append(FillJob(entry: entry, url: url, work: WorkHold(entry.use)))
            }
            return takeStartable(&state)
        }
    }

    /// Stops filling `entry` in the background (transfers already running finish).
    package func stopFilling(_ entry: any BlockStore) {
        locked { state in state.fillJobs.removeAll { $0.entry === entry } }
    }

    /// Whether any transfer for `entry` is running.
    package func isTransferring(_ entry: any BlockStore) -> Bool {
        locked { ($0.runningPerEntry[ObjectIdentifier(entry)] ?? 0) > 0 }
    }

    /// Whether `entry` is waiting to be completed in the background (or being completed).
    package func isFilling(_ entry: any BlockStore) -> Bool {
        locked { $0.fillJobs.contains { $0.entry === entry } }
    }

    /// Lets transfers that paused themselves (a file the user resumed) continue at once.
    package func wakeTransfers() {
        fetcher.wake()
        demandFetcher.wake()
    }

    /// How many transfers are running and queued, and how many files are being filled; for status and tests.
    var load: (running: Int, queued: Int, filling: Int) {
        locked { ($0.running, $0.queue.count, $0.fillJobs.count) }
    }

    /// Takes every request that may start now off the queue (and generates fill work if there is room), counting
    /// them as running.
    private func takeStartable(_ state: inout State) -> [Pending] {
        state.queue.sort { ($0.priority, -Int64($0.sequence)) > ($1.priority, -Int64($1.sequence)) }
        var started: [Pending] = []
        var index = 0
        while index < state.queue.count {
            let next = state.queue[index]
            if next.priority == .demand || mayStart(next.priority, next.entry, in: state) {
                state.queue.remove(at: index)
                Self.count(next, in: &state, by: 1)
                started.append(next)
            } else {
                index += 1
            }
        }
        // Shutting down: a fill refused by the stopped engine would claim the next segment at once, for ever (a
        // file under a cache cap always has one), each in the stack of the last; it crashed the daemon at unmount.
        if state.fillJobs.first?.entry.isStopping == true { return started }
        while let work = nextFillSegment(&state) {
            Self.count(work, in: &state, by: 1)
            started.append(work)
        }
        return started
    }

    private func mayStart(_ priority: FetchPriority, _ entry: any BlockStore, in state: State) -> Bool {
        guard state.running < policy.maxTransfers,
              state.runningPerEntry[ObjectIdentifier(entry), default: 0] < policy.connectionsPerFile
        else { return false }
        if priority == .fill {
            return state.runningFill < policy.fillTransfers && state.runningDemand == 0 && !state.fillHeld
                && state.runningReadahead == 0
        }
        return true
    }

    /// Claims the next missing segment of a file being filled, round-robin over files; drops finished files.
    private func nextFillSegment(_ state: inout State) -> Pending? {
        var tried = 0
        var active: Int { min(state.fillJobs.count, policy.maxDownloads ?? Int.max) }
        while active > 0 && tried < active {
            let jobIndex = state.nextFillJob % active
            state.nextFillJob += 1
            tried += 1
            let job = state.fillJobs[jobIndex]
            guard mayStart(.fill, job.entry, in: state) else { continue }
            if job.entry.isStale || job.entry.isComplete || job.entry.hasWriteFailure {
                state.fillJobs.remove(at: jobIndex)
                tried = 0
                continue
            }
            let blocksPerSegment = max(1, Int(policy.segmentBytes / UInt64(job.entry.blockSize)))
            state.fillJobs[jobIndex].claimedBefore = true
            var blocks: Range<Int>, cursor: Int
            switch job.entry.claimFillRun(from: job.cursor, limit: blocksPerSegment, newPass: !job.claimedBefore) {
            case .run(let run, let next): (blocks, cursor) = (run, next)
            case .nothingFree: continue  // everything missing is already being fetched by someone
            case .noRoom:
                // The cache cap leaves no room to complete it (a file larger than the cap is read through).
                state.fillJobs.remove(at: jobIndex)
                tried = 0
                continue
            }
            // Aligned to the segment boundaries, and for a refetch after a digest mismatch one earlier mirror per
            // request (see `segments` and MirrorSet.pieces).
            if let first = segments(of: blocks, in: job.entry, url: job.url).first, first != blocks {
                job.entry.releaseClaims(first.upperBound..<blocks.upperBound)
                (blocks, cursor) = (first, first.upperBound)
            }
            state.fillJobs[jobIndex].cursor = cursor
            var wholeFile = false
            if job.entry.isRangeless {
                // Its server ignores Range: one stream from byte 0 brings every block, unless one runs already (a
                // file whose stream had stopped was never completed, and the other files' fill waited a round).
                job.entry.releaseClaims(blocks)
                guard job.entry.beginStream() else { continue }
                (blocks, wholeFile) = (0..<job.entry.blockCount, true)
            }
            let work = Pending(sequence: state.nextSequence, priority: .fill, entry: job.entry, url: job.url,
                               blocks: blocks, wholeFile: wholeFile)
            state.nextSequence += 1
            return work
        }
        return nil
    }

    private static func count(_ work: Pending, in state: inout State, by delta: Int) {
        count(work.priority, of: work.entry, in: &state, by: delta)
    }

    private static func count(_ priority: FetchPriority, of entry: any BlockStore, in state: inout State, by delta: Int) {
        state.running += delta
        if priority == .demand { state.runningDemand += delta }
        if priority == .fill { state.runningFill += delta }
        if priority == .readahead { state.runningReadahead += delta }
        let key = ObjectIdentifier(entry)
        entry.use.addWork(delta)  // a running transfer keeps its entry open (EntryUse.addWork)
        state.runningPerEntry[key, default: 0] += delta
        if state.runningPerEntry[key] == 0 { state.runningPerEntry[key] = nil }
    }

    private func start(_ pending: Pending) {
        var rate: Int?
        if pending.priority == .fill, let limit = policy.fillBytesPerSecond {
            rate = max(1024, limit / max(1, policy.fillTransfers))
        }
        var sinkPolicy = policy
        if pending.singleAttempt { sinkPolicy.attempts = 1 }
        let sink = BlockSink(entry: pending.entry, url: pending.url, mirrors: mirrors.mirrors(of: pending.url),
                             blocks: pending.blocks,
                             wholeFile: pending.wholeFile, priority: pending.priority, maxBytesPerSecond: rate,
                             policy: sinkPolicy, logger: logger, engines: engines, metrics: metrics, owner: self)
        if pending.priority == .fill {
            locked { $0.runningFillSinks[ObjectIdentifier(sink)] = sink }
        }
        sink.startAttempt()
    }

    /// Takes on a transfer already under way: the rest of an open's probe, whose head showed that it brings
    /// `blocks` of `entry` (claimed by the caller) from byte 0 of `url`. Returns the sink to hand its answer to
    /// (ProbeBody.swift); from then on it counts, stores its blocks and retries as a readahead transfer started here
    /// (to the file's own URL, not its mirrors: the request already went there).
    package func adopt(_ entry: any BlockStore, url: String, blocks: Range<Int>) -> BlockSink {
        let sink = BlockSink(entry: entry, url: url, blocks: blocks, priority: .readahead, maxBytesPerSecond: nil,
                             policy: policy, logger: logger, engines: engines, metrics: metrics, owner: self)
        schedule { state in
            Self.count(.readahead, of: entry, in: &state, by: 1)
            return []
        }
        sink.adoptAttempt()
        return sink
    }

    /// Streams the whole of `entry` from byte 0 for a server that ignores Range, unless a stream already runs.
    package func startStream(_ entry: any BlockStore, url: String) {
        guard entry.beginStream() else { return }
        schedule { state in
            let work = Pending(sequence: state.nextSequence, priority: .demand, entry: entry, url: url,
                               blocks: 0..<entry.blockCount, wholeFile: true)
            state.nextSequence += 1
            Self.count(work, in: &state, by: 1)
            return [work]
        }
    }

    /// Runs `body` after `delay` on a background queue.
    func after(_ delay: Duration, _ body: @escaping @Sendable () -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + delay.dispatchInterval, execute: body)
    }

    /// A transfer ended: it no longer counts as running, and the work it made room for starts.
    func transferEnded(_ sink: BlockSink, outcome: TransferOutcome) {
        sink.tally.drain(into: metrics)
        let entry = sink.blockStore
        schedule { state in
            state.runningFillSinks[ObjectIdentifier(sink)] = nil
            Self.count(sink.priority, of: sink.countedStore, in: &state, by: -1)
            return takeStartable(&state)
        }
        if outcome == .rangeIgnored || outcome == .streamAgain { startStream(entry, url: sink.url) }
    }
}
