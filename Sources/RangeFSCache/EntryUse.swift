// Who uses one cache entry: the handles open on it, when it was last active, and the processes whose READs wait on
// it. The store reads it to release entries nobody uses (CacheStore+Idle.swift); a transfer reads it, through
// `BlockStore.hasLiveUse`, to stop fetching for nobody.
//
// Why the pids: a transfer that a reader started is work for nobody once that reader is gone, but the daemon cannot
// see it go: the kernel's READ that waits for the blocks is a page-cache readahead request, which no signal
// interrupts, and which holds the file's handle open (no RELEASE comes) until it is answered. What the daemon can
// see is who asked: each READ carries the pid of the process that caused it. So the entry keeps the pids of its
// waiting READs, and a transfer asks whether any of them is still alive (the transfers that fill it ask).
//
// Why the work count: an entry nobody holds may still have work coming (a fill queued or running, a transfer, a
// digest check); releasing it then would fetch into, or check, an entry the store no longer has. Whoever has the
// work counts it here while it lasts, so the store reads it below instead of asking the layers above (issue 48).

import RangeFSSystem
import Synchronization

package final class EntryUse: Sendable {
    /// Open handles on the entry (`begin`); the store never releases an entry in use.
    private let handles = Atomic(0)
    /// When the entry was last asked for, used or stored a block, in milliseconds of `EntryUse.milliseconds`.
    private let lastActive = Atomic(EntryUse.milliseconds())
    /// The processes with a READ waiting on the entry, by pid, with how many READs each.
    private let waitingReaders = LockedBox<[Int32: Int]>([:])
    /// Work queued or running for the entry (fills, transfers, digest checks): `addWork`.
    private let work = Atomic(0)

    /// The clock of `lastActivity`: milliseconds since the process first asked.
    private static let clockStart = ContinuousClock.now
    static func milliseconds() -> Int {
        let elapsed = ContinuousClock.now - clockStart
        return Int(elapsed.components.seconds) * 1000 + Int(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    /// Records activity now: the store keeps an entry open while it is active (see `CacheStore.releaseIdleEntries`).
    func noteActivity() { lastActive.store(Self.milliseconds(), ordering: .relaxed) }

    /// When the entry was last active (`milliseconds`).
    var lastActivity: Int { lastActive.load(ordering: .relaxed) }

    /// A handle opened on the entry; the store keeps it open until the matching `end`.
    package func begin() {
        handles.add(1, ordering: .relaxed)
        noteActivity()
    }

    /// A handle on the entry closed.
    package func end() {
        handles.subtract(1, ordering: .relaxed)
        noteActivity()
    }

    /// Whether a handle is open on the entry.
    var isHeld: Bool { handles.load(ordering: .relaxed) > 0 }

    /// Begins on `successor` (the entry this one was reshaped into) one use per handle open on this one now, and
    /// returns how many: whoever moves the handles ends them (RangeFS.entryReshaped).
    func lendHandles(to successor: EntryUse) -> Int {
        let open = max(0, handles.load(ordering: .relaxed))
        for _ in 0..<open { successor.begin() }
        return open
    }

    /// `delta` pieces of work for the entry began (positive) or ended (negative); each beginning is ended once.
    package func addWork(_ delta: Int) {
        let now = work.add(delta, ordering: .relaxed).newValue
        assert(now >= 0, "an entry's work ended more often than it began")
    }

    /// Whether work is queued or running for the entry: the store keeps it open meanwhile.
    package var hasWork: Bool { work.load(ordering: .relaxed) > 0 }

    /// A READ of process `pid` (0: unknown) starts waiting on the entry.
    package func beginRead(pid: Int32) {
        waitingReaders.withLock { $0[pid, default: 0] += 1 }
    }

    /// That READ was answered.
    package func endRead(pid: Int32) {
        waitingReaders.withLock { readers in
            if let count = readers[pid], count > 1 { readers[pid] = count - 1 } else { readers[pid] = nil }
        }
    }

    /// Whether a live process still uses the file: one of the processes whose READs wait on it still exists, or,
    /// when no READ waits, a handle is open on it.
    package var hasLiveUse: Bool {
        let readers = waitingReaders.withLock { Array($0.keys) }
        if readers.isEmpty { return isHeld }
        return readers.contains(where: FileSystemCalls.processExists)
    }
}

/// Work for an entry for as long as this lives (a fill job while it is queued): begun at its birth, ended at its
/// end, so that however the job leaves its queue, its work ends once.
package final class WorkHold: Sendable {
    private let use: EntryUse

    package init(_ use: EntryUse) {
        self.use = use
        use.addWork(1)
    }

    deinit {
        use.addWork(-1)
    }
}
