// The commit: what makes present blocks durable. The store commits every changed entry every commit interval, and
// early once its entries stored `commitBytes` since the last commit (StoreLedger.countTowardsCommit). A commit
// snapshots the present set, makes the data and CRC files (and a new entry's header) durable, and only then
// replaces the bitmap file with the snapshot (temp file, flush, rename, flush of the folder). So a bit never
// reaches the disk before its data, and a crash loses at most what was stored since the last commit (and the
// blocks still waiting for the writer, which were never present). No reader waits for a commit: commits run on
// the store's commit queue, or for one entry when it is closed.
//
// The flushes are the cost. One entry alone flushes its own files (`commit`); a group commit of many entries
// (CacheStore+Commit) flushes the whole file system once for all of them instead, so a directory of small
// files does not pay a disk flush per file per step. This file holds an entry's part of both: the plan (its
// snapshot and new bitmap record), its own flushes, and what success or failure does to its state.

import Glibc

extension CacheEntry {
    /// What one commit of this entry makes durable: the present set as of the commit's start.
    struct CommitPlan {
        let snapshot: BlockBitmap
        /// Whether the durable set was already complete, so that reaching it now is no completion.
        let wasComplete: Bool
        /// Whether the header still waits for its first flush.
        let newHeader: Bool
        /// The bitmap file's new contents.
        let record: [UInt8]
    }

    var bitmapPath: String { directory + "/bitmap" }

    /// Commits this entry alone, with flushes of its own files: fdatasync data and CRCs (and the header of a new
    /// entry), then atomically replace the bitmap file. Returns whether anything was written.
    @discardableResult
    func commit() throws(SystemError) -> Bool {
        try commitLock.withLock { () throws(SystemError) -> Bool in
            guard let plan = planCommit() else { return false }
            do throws(SystemError) {
                try flushAlone(plan)
            } catch {
                abandon(plan)
                throw error
            }
            finish(plan)
            return true
        }
    }

    /// Takes the snapshot a commit makes durable; nil if the present set did not change since the last commit.
    /// The caller holds `commitLock` until it calls `finish` or `abandon`.
    func planCommit() -> CommitPlan? {
        let taken = state.withLock { state -> (BlockBitmap, Bool)? in
            guard state.changedSinceCommit else { return nil }
            state.changedSinceCommit = false
            let refetched = state.refetching && state.blocks.present.isFull
            if refetched { state.refetching = false }
            return (state.blocks.present, state.blocks.durable.isFull && !refetched)
        }
        guard let (snapshot, wasComplete) = taken else { return nil }
        let record = BitmapRecord(blockSize: blockSize, generation: header.generation, present: snapshot)
        return CommitPlan(snapshot: snapshot, wasComplete: wasComplete,
                          newHeader: !headerDurable.load(ordering: .relaxed), record: record.encoded())
    }

    /// The flushes of a commit of this entry alone, under `commitLock`.
    func flushAlone(_ plan: CommitPlan) throws(SystemError) {
        try dataFile.synchronizeData()
        try crcFile.synchronizeData()
        if plan.newHeader {
            // The header's name is made durable with the bitmap's, by the folder's flush of the replace below.
            try SystemFile(path: directory + "/header", flags: O_RDONLY).synchronizeData()
        }
        try FileSystemCalls.replaceAtomically(bitmapPath, with: plan.record)
    }

    /// A planned commit failed: the next one takes this entry again.
    func abandon(_ plan: CommitPlan) {
        state.withLock { $0.changedSinceCommit = true }
    }

    /// A planned commit is durable: its snapshot becomes the durable set.
    func finish(_ plan: CommitPlan) {
        headerDurable.store(true, ordering: .relaxed)
        state.withLock { $0.blocks.committed(plan.snapshot) }
        // The whole file is durable now: its end-to-end check may read it.
        if plan.snapshot.isFull && !plan.wasComplete { ledger.completed(self) }
    }

    /// Bytes of blocks present but not yet in the bitmap on disk: what exiting now would lose.
    var uncommittedBytes: UInt64 {
        state.withLock { state in
            var notDurable = state.blocks.present
            for index in 0..<blockCount where state.blocks.durable.contains(index) { _ = notDurable.remove(index) }
            return geometry.bytes(in: notDurable)
        }
    }

    /// What the bitmap file on disk says, as of the last commit.
    var durableBlocks: BlockBitmap { state.withLock { $0.blocks.durable } }
}
