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
import Foundation
import Logging
import Synchronization

/// Bytes stored whose group commit has not completed, and a wait for the writer while they reach `limit`.
final class CommitBacklog: @unchecked Sendable {
    // @unchecked Sendable: `bytes` is only touched under `condition`'s lock.
    private let condition = NSCondition()
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
            let deadline = Date().addingTimeInterval(30)
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
        commitQueue.asyncAfter(deadline: .now() + settings.commitInterval.dispatchInterval) { [weak self] in
            guard let self, self.committing.withLock({ $0 }) else { return }
            self.commitAll()
            self.scheduleCommit()
        }
    }

    /// Counts `bytes` just stored; once `commitBytes` were stored since the last group commit began, starts one
    /// now, outside the timer. Requests made while one is queued are folded into it. So however fast the link, a
    /// crash loses at most about `commitBytes` of stored blocks (plus what waits for the writer).
    func countTowardsCommit(_ bytes: Int) {
        backlog.add(bytes)
        defer { backlog.waitWhileFull(logger: logger) }
        let total = uncommittedBytes.add(bytes, ordering: .relaxed).newValue
        guard total >= settings.commitBytes,
              earlyCommitQueued.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        commitQueue.async { [self] in
            earlyCommitQueued.store(false, ordering: .releasing)
            commitAll()
        }
    }

    /// Commits every open entry now, on the calling thread.
    func commitAll() {
        let bytes = uncommittedBytes.exchange(0, ordering: .relaxed)
        let start = ContinuousClock.now
        var committed = 0
        for entry in entries.withLock({ Array($0.values) }) {
            do {
                if try entry.commit() { committed += 1 }
            } catch {
                logger.error("cache commit failed: \(error)")
            }
        }
        backlog.committed(bytes)
        releaseIdleEntries()
        if committed > 0 {
            logger.debug("committed \(committed) entries (\(bytes >> 10) KiB stored since the last commit) in \(ContinuousClock.now - start)")
        }
    }

    /// Stops the periodic commits and commits everything; the lock is released when the store is freed.
    public func close() {
        committing.withLock { $0 = false }
        waitForWrites()
        commitQueue.sync { commitAll() }
    }
}
