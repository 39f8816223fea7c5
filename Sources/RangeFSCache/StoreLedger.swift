// What the entries of one store share with it: the bytes counted under the size cap and the LRU eviction that
// keeps them there (StoreLedger+Eviction.swift), the group commit's counters and its early start, how writes to
// the cache fare, the shutdown flag, the servers found to rotate their ETags, and the per-URL opening locks.
//
// The store makes one at its birth and hands it to every entry it opens. An entry reaches store-wide state
// through what it holds and never through its store (issue 39): a received block goes entry → ledger (room
// made, bytes counted, use recorded, commit asked for) and on to the writer, never back into the store and out
// again. The ledger holds no entry but weakly (the eviction queue's records), and of the store only a way to
// start its group commit (a weak one) and the sending of a `completed` report, so an entry never keeps a store alive
// and never calls it. When the store goes, its ledger is `detach`ed: entries that outlive it store blocks without
// waiting for commits that will not come, and write no header of theirs any more.

import Dispatch
import Logging
import RangeFSSystem
import Synchronization


/// More than 12 stored properties: what every entry shares with its store, a field or two per concern, each one's
/// code in its own extension: the cap and its eviction queue, the group commit's pace (bytes, backlog, health,
/// signal), the totals of writes, the stopping and detached flags, the rotating ETags, the opening locks, and the
/// store's two hooks (`reopenHook`, `settleHook`).
package final class StoreLedger: Sendable {
    /// The cap on cached bytes of this mount's files (`--cache-max-size`), or nil for none.
    let maxBytes: Int?
    /// A group commit starts early once this many bytes were stored since the last one began.
    let commitBytes: Int
    /// The mount's counters (evicted bytes).
    let metrics: Metrics
    let eviction = LockedBox(EvictionQueue())
    /// Bytes the store's entries stored since the last group commit began.
    let uncommittedBytes = Atomic(0)
    /// Bytes stored whose group commit has not completed.
    let backlog: CommitBacklog
    /// How the group commits fare (CommitHealth.swift).
    let commitHealth = LockedBox(CommitHealth())
    /// Bytes written to the cache since the store opened, and bytes fetched that could not be written.
    let storedTotal = Atomic(0)
    let unwrittenTotal = Atomic(0)
    /// Whether the last write of fetched blocks failed (see `noteWrite`).
    let writesFailing = Atomic(false)
    /// Set when the process starts shutting down (`CacheStore.markStopping`): background fill starts nothing more.
    let stopping = Atomic(false)
    /// The servers found to rotate their ETags (kept in `rotating-etags`).
    let rotatingETags: RotatingETags
    /// Held while an entry is opened from its files or started, so that one file never gets two entries: one
    /// lock per URL (of 64, by a hash of it), so that many new files of a directory are made at once, not one
    /// after another behind the disk (`opening(_:)`).
    private let openingLocks = (0..<64).map { _ in ExclusiveLock() }
    /// A commit made an entry's whole file durable (sent into the store's `reports` as `EntryEvent.completed`).
    let completed: @Sendable (CacheEntry) -> Void
    /// Starts the store's group commit early (`commitSoon`): the store's own trigger, which the ledger can only fire.
    let commitSignal: CommitSignal
    /// Opens the released entry of a URL again, for eviction to take its blocks (`reopenDormant`): set by the store's
    /// `init` (weakly holding it); nil before, and does nothing after the store is gone.
    let reopenHook = LockedBox<ReopenHook?>(nil)
    /// Settles an entry of unknown size whose body ended, or grows one it outgrew (`StreamStep.ended`,
    /// `.outgrew`): set by the store's `init`, as `reopenHook` is.
    let settleHook = LockedBox<SettleHook?>(nil)
    /// Set when the store is gone (`detach`).
    let detached = Atomic(false)
    let logger: Logger

    init(settings: StoreSettings, metrics: Metrics, rotatingETags: RotatingETags,
         completed: @escaping @Sendable (CacheEntry) -> Void, commitSignal: CommitSignal, logger: Logger) {
        maxBytes = settings.maxBytes
        commitBytes = settings.commitBytes
        self.metrics = metrics
        backlog = CommitBacklog(limit: 2 * settings.commitBytes)
        self.rotatingETags = rotatingETags
        self.completed = completed
        self.commitSignal = commitSignal
        self.logger = logger
    }

    /// Counts `bytes` just stored; once `commitBytes` were stored since the last group commit began, starts one
    /// now, outside the timer. Requests made while one is queued are folded into it. So however fast the link, a
    /// crash loses at most about `commitBytes` of stored blocks (plus what waits for the writer).
    func countTowardsCommit(_ bytes: Int) {
        storedTotal.add(bytes, ordering: .relaxed)
        // While commits fail, only the timer tries again (backing off), and the writer does not wait for them;
        // after the store is gone, none will come.
        if commitHealth.withLock({ $0.isFailing }) || detached.load(ordering: .relaxed) { return }
        backlog.add(bytes)
        defer { backlog.waitWhileFull(logger: logger) }
        let total = uncommittedBytes.add(bytes, ordering: .relaxed).newValue
        if total >= commitBytes { commitSoon() }
    }

    /// `entry` stored a block that may have completed it. A completed file at least `commitBytes` long is
    /// committed now rather than at the next tick, so that the next open hands it to the kernel (passthrough):
    /// a copy started right after a cold one reads at the disk's speed. It costs at most one commit more than
    /// its size caused anyway; smaller files wait for the tick, where many are committed together.
    func noteStored(to entry: CacheEntry) {
        guard commitsOnCompletion(entry), entry.isComplete else { return }
        commitSoon()
    }

    /// Whether `entry` is committed on its own as soon as it completes (and an open waits for that commit): a
    /// file at least `commitBytes` long, whose passthrough is worth a commit. A small file joins the next tick,
    /// where many are committed together; reading it through the daemon meanwhile costs little.
    package func commitsOnCompletion(_ entry: CacheEntry) -> Bool {
        commitsOnCompletion(size: entry.header.size)
    }

    /// Whether a file of `size` bytes would be (see above): asked before its entry is looked up.
    package func commitsOnCompletion(size: UInt64) -> Bool {
        size >= UInt64(commitBytes)
    }

    /// Starts a group commit on the commit queue now, unless one is queued and has not begun (it is folded into
    /// that one) or commits are failing (then only the timer tries again).
    func commitSoon() {
        if commitHealth.withLock({ $0.isFailing }) { return }
        commitSignal.fire()
    }

    /// Records that fetched blocks (`bytes`) could not be written, or (`error` nil) that a write worked again.
    func noteWrite(failure error: SystemError?, bytes: Int = 0) {
        if error != nil { unwrittenTotal.add(bytes, ordering: .relaxed) }
        // Checked without the lock on every write that works: one load while the disk is fine.
        guard error != nil || writesFailing.load(ordering: .relaxed) else { return }
        writesFailing.store(error != nil, ordering: .relaxed)
        commitHealth.withLock { $0.writeError = error }
    }

    /// The store is gone: no commit will come. Whatever waits for one goes on, and nothing waits from now on.
    func detach() {
        detached.store(true, ordering: .relaxed)
        backlog.committed(Int.max)
    }

    /// The lock held while the entry of `url` is opened or its header replaced.
    func opening(_ url: String) -> ExclusiveLock {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in url.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return openingLocks[Int(hash % UInt64(openingLocks.count))]
    }
}

/// Runs the store's group commit on its commit queue when fired; firings made before that run begins are folded
/// into it (a dispatch source's data is merged until its handler runs). The store owns it: it makes it before its
/// ledger, gives the ledger only a way to fire it (`signal`), and says what it runs at the end of its `init`; until
/// then, and after the store is gone (its `deinit` cancels it), a firing runs nothing.
final class CommitTrigger: @unchecked Sendable {
    // @unchecked Sendable: a dispatch source may be fired and given its handler from any thread.
    private let source: any DispatchSourceUserDataOr

    init(queue: DispatchQueue) {
        source = DispatchSource.makeUserDataOrSource(queue: queue)
        // Active from the start: a source released while inactive would crash the process.
        source.activate()
    }

    private let handlerSet = Atomic(false)

    /// What a firing runs, on the commit queue: set once, by the store's `init`, on the trigger it owns (its own
    /// commit, which cannot exist before the ledger the store is made with; the ledger holds only `signal`).
    func run(_ commit: @escaping @Sendable () -> Void) {
        precondition(!handlerSet.exchange(true, ordering: .relaxed), "a commit trigger runs one store's commits")
        source.setEventHandler(handler: commit)
    }

    func fire() {
        source.or(data: 1)
    }

    /// The one thing the ledger may do with the trigger: fire it.
    var signal: CommitSignal { CommitSignal(trigger: self) }

    /// No commit runs any more: the store is gone.
    func cancel() {
        source.cancel()
    }

    deinit {
        source.cancel()
    }
}

/// A send-only view of the store's commit trigger: the ledger asks for a commit and cannot say what it runs.
struct CommitSignal: Sendable {
    fileprivate let trigger: CommitTrigger

    func fire() { trigger.fire() }
}

/// The store's way to open a released entry again (`StoreLedger.reopenHook`). A struct, not a bare closure: a
/// closure kept in a generic lock (a `Mutex` then, a `LockedBox` now) comes back from each `withLock { $0 }`
/// wrapped in two more reabstraction thunks, written back through the generic `inout`, so each call went through
/// two more calls than the one before (issue 46: 135,000 frames deep after 60,000 evictions, and the daemon
/// stalled).
struct ReopenHook: Sendable {
    /// Opens the entry of a URL again; returns whether it is open now.
    let reopen: @Sendable (String) -> Bool

    init(_ reopen: @escaping @Sendable (String) -> Bool) { self.reopen = reopen }
}

/// The store's way to settle an entry of unknown size at the size its stream found, or to grow it
/// (`StoreLedger.settleHook`; a struct for the reason `ReopenHook` is one).
struct SettleHook: Sendable {
    /// The entry, its size (nil: its body outgrew its capacity), the bytes of its last block past the last whole
    /// one, and for a growth who gets the grown entry (StreamStep.outgrew).
    typealias Next = @Sendable ((any BlockStore)?) -> Void
    let settle: @Sendable (CacheEntry, UInt64?, [UInt8], Next?) -> Void

    init(_ settle: @escaping @Sendable (CacheEntry, UInt64?, [UInt8], Next?) -> Void) { self.settle = settle }
}
