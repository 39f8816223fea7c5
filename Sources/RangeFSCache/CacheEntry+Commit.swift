// The commit: what makes present blocks durable. The store commits every changed entry every commit interval, and
// early once its entries stored `commitBytes` since the last commit (StoreLedger.countTowardsCommit). A commit
// snapshots the present set, makes the data and the CRC table (and a new entry's files) durable, and only then
// writes the snapshot into the meta block's inactive slot with the next sequence number, and flushes it
// (MetaBlock.swift: a torn slot leaves the other, older one). So a bit never reaches the disk before its data, and a crash loses at most what was stored since the last commit (and the
// blocks still waiting for the writer, which were never present). No reader waits for a commit: commits run on
// the store's commit queue, or for one entry when it is closed.
//
// The flushes are the cost. One entry alone flushes its own files (`commit`); a group commit of many entries
// (CacheStore+Commit) flushes the whole file system once for all of them instead, so a directory of small
// files does not pay a disk flush per file per step. This file holds an entry's part of both: the plan (its
// snapshot and new slot), its own flushes, and what success or failure does to its state.

import Glibc
import RangeFSSystem

extension CacheEntry {
    /// What one commit of this entry makes durable: the present set as of the commit's start.
    struct CommitPlan {
        let snapshot: BlockBitmap
        /// Whether the durable set was already complete, so that reaching it now is no completion.
        let wasComplete: Bool
        /// Whether the header still waits for its first flush.
        let newHeader: Bool
        /// The new slot's sequence and contents, written at `slotOffset` of the meta file.
        let sequence: UInt64
        let record: [UInt8]
        let slotOffset: UInt64
    }

    /// Commits this entry alone, with flushes of its own files: fdatasync data and meta block (and the folder of a
    /// new entry), then write the inactive slot and fdatasync it. Returns whether anything was written.
    @discardableResult
    package func commit() throws(SystemError) -> Bool {
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
        let sequence = committedSequence.load(ordering: .relaxed) + 1
        // The ETag retired in memory, or already in the slot this entry was loaded from (its header then has none).
        let slot = MetaSlot(sequence: sequence, generation: header.generation, answeredAt: answeredAt,
                            etagRetired: etagRetired.load(ordering: .relaxed) || header.etag.isEmpty, present: snapshot)
        return CommitPlan(snapshot: snapshot, wasComplete: wasComplete,
                          newHeader: !headerDurable.load(ordering: .relaxed), sequence: sequence,
                          record: slot.encoded(),
                          slotOffset: metaOffset + UInt64(metaLayout.slotOffset(Int(sequence % 2))))
    }

    /// The flushes of a commit of this entry alone, under `commitLock`.
    func flushAlone(_ plan: CommitPlan) throws(SystemError) {
        try dataFile.synchronizeData()
        if !isSmall { try metaFile.synchronizeData() }
        if plan.newHeader {
            // The new files' names (and a new shard's), before a slot makes them claim anything.
            try FileSystemCalls.synchronizeDirectory(containing: files.base)
            try FileSystemCalls.synchronizeDirectory(containing: files.shard)
        }
        try writeSlot(plan)
        try metaFile.synchronizeData()
    }

    /// Writes a plan's slot in place (the inactive one: the newest valid slot stays as it was).
    func writeSlot(_ plan: CommitPlan) throws(SystemError) {
        try metaFile.write(plan.record, at: plan.slotOffset)
    }

    /// A planned commit failed: the next one takes this entry again.
    func abandon(_ plan: CommitPlan) {
        state.withLock { $0.changedSinceCommit = true }
    }

    /// A planned commit is durable: its snapshot becomes the durable set.
    func finish(_ plan: CommitPlan) {
        headerDurable.store(true, ordering: .relaxed)
        committedSequence.store(plan.sequence, ordering: .relaxed)
        state.withLock { $0.blocks.committed(plan.snapshot) }
        // The whole file is durable now: its end-to-end check may read it.
        if plan.snapshot.isFull && !plan.wasComplete { ledger.completed(self) }
    }

    /// Bytes of blocks present but not yet in a slot on disk: what exiting now would lose.
    var uncommittedBytes: UInt64 {
        state.withLock { state in
            var notDurable = state.blocks.present
            for index in 0..<blockCount where state.blocks.durable.contains(index) { _ = notDurable.remove(index) }
            return geometry.bytes(in: notDurable)
        }
    }

    /// What the newest slot on disk says, as of the last commit.
    var durableBlocks: BlockBitmap { state.withLock { $0.blocks.durable } }
}
