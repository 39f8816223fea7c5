// The store's group commit: every entry that changed is committed (CacheEntry+Commit) every `commitInterval`, and
// early once the store's entries stored `commitBytes` since the last commit began. So a crash loses about
// `commitBytes` of stored blocks at most, whatever the link speed, plus what waits for the writer.
//
// That holds only while commits keep up. When the disk is slower than the link, stored blocks would run ahead of
// the last completed commit without limit; so once twice `commitBytes` are stored but not yet committed, the
// writer thread waits for the running commit (`CommitBacklog`). The write budget then fills, and receiving waits
// for the disk: the link runs at the disk's pace, and the loss bound holds. Readers never wait for a commit while
// the disk keeps up, and they are answered from the received buffers either way.

import Dispatch
import Glibc
import Logging
import RangeFSPlatform
import RangeFSSystem
import Synchronization

/// Bytes stored whose group commit has not completed, and a wait for the writer while they reach `limit`.
final class CommitBacklog: @unchecked Sendable {
    // @unchecked Sendable: `bytes` is only touched under `condition`'s lock.
    private let condition = Condition()
    private var bytes = 0
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    func add(_ count: Int) {
        condition.withLock { bytes += count }
    }

    /// A commit that covered `count` bytes ended (successfully or not: a failed commit is retried by the next).
    func committed(_ count: Int) {
        condition.withLock {
            bytes = max(0, bytes - count)
            condition.broadcast()
        }
    }

    /// Waits while `limit` or more bytes wait for a commit; gives up after 30 s (a disk that stalls that long
    /// is logged, and the bound yields rather than the mount hanging).
    func waitWhileFull(logger: Logger) {
        condition.withLock {
            let deadline = Condition.deadline(after: 30)
            while bytes >= limit {
                if !condition.wait(until: deadline) {
                    logger.warning("the cache disk has not committed \(bytes >> 20) MiB for 30 s; going on without waiting")
                    return
                }
            }
        }
    }
}

extension CacheStore {
    /// Starts committing dirty entries every `commitInterval`, until `close`.
    public func startCommitting() {
        committing.withLock { $0 = true }
        scheduleCommit()
    }

    private func scheduleCommit() {
        let delay = ledger.commitHealth.withLock { $0.delay(interval: settings.commitInterval) }
        commitQueue.asyncAfter(deadline: .now() + delay.dispatchInterval) { [weak self] in
            guard let self, self.committing.withLock({ $0 }) else { return }
            self.commitAll()
            self.scheduleCommit()
        }
    }

    /// Waits for the writer, then commits `entry` on the commit queue, after any commit running there, then
    /// calls `then` off that queue. For an open of a file just completed: one commit of one file, instead of
    /// reading it through the daemon until the next tick. The writer is waited for off the commit queue: it may
    /// itself wait for a commit (`CommitBacklog`). An open waits at most `openCommitWait` (a slow disk, a long
    /// group commit), and not at all while commits fail: then it goes on as a normal handle.
    package func commit(_ entry: CacheEntry, then: @escaping @Sendable () -> Void) {
        let answered = LockedBox(false)
        let answer: @Sendable () -> Void = { [pipeline] in
            let first = answered.withLock { done -> Bool in
                defer { done = true }
                return !done
            }
            if first { pipeline.replyQueue.async(execute: then) }
        }
        if ledger.commitHealth.withLock({ $0.isFailing }) { return answer() }
        pipeline.replyQueue.asyncAfter(deadline: .now() + Self.openCommitWait.dispatchInterval, execute: answer)
        DispatchQueue.global().async { [self] in
            waitForWrites()
            commitQueue.async { [self] in
                do {
                    try entry.commit()
                } catch {
                    logger.debug("cannot commit \(entry.directory) for its open: \(error)")
                }
                answer()
            }
        }
    }

    /// The longest an open waits for the commit that lets it pass a just completed file through.
    static let openCommitWait: Duration = .seconds(2)

    /// Whether a group commit of `planned` flushes the whole file system once for all (`commitTogether`) rather
    /// than each entry's own files: for more than one entry, and for one new small file (four flushes of its
    /// own against two). One big file alone (`commitsOnCompletion`) keeps its own flushes, even when new: a
    /// flush of the whole file system also writes what other programs left dirty on it (the destination of a
    /// `cp` out of the mount, often on the same disk), and the writer must not wait for that during a copy.
    func commitsTogether(_ planned: [(entry: CacheEntry, plan: CacheEntry.CommitPlan)]) -> Bool {
        planned.count > 1 || planned.contains { $0.plan.newHeader && !ledger.commitsOnCompletion($0.entry) }
    }

    /// Commits every open entry that changed, now, on the calling thread: one big file alone, with flushes of
    /// its files; anything more together, with two flushes of the file system (`commitsTogether`).
    func commitAll() {
        let bytes = ledger.uncommittedBytes.exchange(0, ordering: .relaxed)
        let start = ContinuousClock.now
        // Each planned entry's commit lock is held until its commit ends, as `CacheEntry.commit` holds it, so
        // that no other commit of it (a close) interleaves. Nothing takes two commit locks but this thread.
        var planned: [(entry: CacheEntry, plan: CacheEntry.CommitPlan)] = []
        for entry in entries.withLock({ Array($0.values) }) {
            entry.commitLock.lock()
            if let plan = entry.planCommit() {
                planned.append((entry, plan))
            } else {
                entry.commitLock.unlock()
            }
        }
        var failure: SystemError?
        var committed = 0
        if commitsTogether(planned) {
            (committed, failure) = commitTogether(planned)
        } else {
            for (entry, plan) in planned {
                do {
                    try entry.flushAlone(plan)
                    entry.finish(plan)
                    committed += 1
                } catch {
                    entry.abandon(plan)
                    // An entry removed meanwhile (`rangefs rm`) has no folder to commit to: no failure.
                    if !entry.isStale { failure = failure ?? error }
                }
            }
        }
        for (entry, _) in planned { entry.commitLock.unlock() }
        ledger.backlog.committed(bytes)
        noteCommit(failure)
        releaseIdleEntries()
        if committed > 0 {
            logger.debug("committed \(committed) entries (\(bytes >> 10) KiB stored since the last commit) in \(ContinuousClock.now - start)")
        }
    }

    /// Commits `planned` entries with two flushes in all: one `syncfs` makes every entry's data, CRC table and
    /// new files durable, each entry's inactive slot is written in place, and a second `syncfs` makes the slots
    /// durable. A crash before the second flush leaves each slot torn (then the other one counts), old or new, and
    /// each is true of data already on the disk. Returns how many entries it committed, and the first failure (the
    /// entries it left out are committed by a later commit).
    private func commitTogether(
        _ planned: [(entry: CacheEntry, plan: CacheEntry.CommitPlan)]
    ) -> (committed: Int, failure: SystemError?) {
        var failure: SystemError?
        do {
            try FileSystemCalls.synchronizeFileSystem(of: lockFile)
        } catch {
            for item in planned { item.entry.abandon(item.plan) }
            return (0, error)
        }
        var written: [(entry: CacheEntry, plan: CacheEntry.CommitPlan)] = []
        for (entry, plan) in planned {
            do {
                try entry.writeSlot(plan)
                written.append((entry, plan))
            } catch {
                entry.abandon(plan)
                // An entry removed meanwhile (`rangefs rm`) has no files to commit to: no failure.
                if !entry.isStale { failure = failure ?? error }
            }
        }
        do {
            try FileSystemCalls.synchronizeFileSystem(of: lockFile)
        } catch {
            // Each slot on disk is old, new or torn, and true either way; the next commit writes them again.
            for item in written { item.entry.abandon(item.plan) }
            return (0, failure ?? error)
        }
        for item in written { item.entry.finish(item.plan) }
        return (written.count, failure)
    }

    /// Records how a group commit went: one log line when commits start failing, one when they work again, and
    /// debug lines between (a full disk would otherwise log every attempt).
    private func noteCommit(_ failure: SystemError?) {
        let (started, recovered) = ledger.commitHealth.withLock { health -> (Bool, (failures: Int, lasted: Duration)?) in
            if let failure {
                let first = health.failingSince == nil
                if first { health.failingSince = .now }
                health.failures += 1
                health.lastError = failure
                return (first, nil)
            }
            guard let since = health.failingSince else { return (false, nil) }
            defer { (health.failingSince, health.failures, health.lastError) = (nil, 0, nil) }
            return (false, (health.failures, .now - since))
        }
        if let failure {
            if started {
                let advice = CommitHealth.advice(for: failure)
                logger.error("cache commits are failing (\(failure)): blocks stored from now on are not kept until a commit works; \(advice); trying again every few seconds")
            } else {
                logger.debug("cache commit failed again: \(failure)")
            }
        }
        if let recovered {
            let seconds = Int(recovered.lasted.seconds.rounded())
            logger.notice("cache commits work again, after \(recovered.failures) failed attempts in \(seconds) s")
        }
    }

    /// Lines for `status` while the cache disk fails the store: fetched blocks that cannot be written, group
    /// commits that fail (since when, why, and what to do). Empty while all works.
    package var cacheProblems: [String] {
        let unwritten = ledger.unwrittenTotal.load(ordering: .relaxed)
        return ledger.commitHealth.withLock { health in
            var lines: [String] = []
            if let error = health.writeError {
                lines.append("cannot write fetched blocks to the cache (\(error)): \(unwritten >> 20) MiB so far were "
                             + "served from memory without being cached; \(CommitHealth.advice(for: error))")
            }
            if let since = health.failingSince, let error = health.lastError {
                let seconds = Int((ContinuousClock.now - since).seconds.rounded())
                lines.append("cache commits are failing (\(health.failures) attempts in \(seconds) s; \(error)): what "
                             + "is stored is not kept until one works; \(CommitHealth.advice(for: error))")
            }
            return lines
        }
    }

    /// Stops the periodic commits and commits everything. Returns nil when everything this mount stored is
    /// committed, else one line that says how much the cache keeps, what it does not, and why (for `rangefs
    /// unmount`). The lock is released when the store is freed.
    @discardableResult
    public func close() -> String? {
        closingReport().summary
    }

    /// Stops the periodic commits, commits everything, and says what of this mount's data the cache keeps.
    func closingReport() -> CacheCloseReport {
        committing.withLock { $0 = false }
        waitForWrites()
        commitQueue.sync { commitAll() }
        var report = CacheCloseReport()
        report.storedBytes = UInt64(ledger.storedTotal.load(ordering: .relaxed))
        report.unwrittenBytes = UInt64(ledger.unwrittenTotal.load(ordering: .relaxed))
        ledger.commitHealth.withLock { health in
            report.writeFailure = health.writeError.map { "\($0); \(CommitHealth.advice(for: $0))" }
            guard health.isFailing, let error = health.lastError else { return }
            report.failure = "\(error); \(CommitHealth.advice(for: error))"
        }
        // Only a failing commit leaves stored blocks out. When the last commit worked, a block present but not durable
        // arrived after it, from a transfer still running at shutdown (a fill): not kept, and never promised, so
        // no reason for `rangefs unmount` to fail.
        if report.failure != nil {
            for entry in entries.withLock({ Array($0.values) }) where !entry.isStale {
                report.uncommittedBytes += entry.uncommittedBytes
            }
        }
        if let summary = report.summary { logger.error("closing the cache: \(summary)") }
        return report
    }
}
