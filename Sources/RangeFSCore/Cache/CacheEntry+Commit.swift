// The group commit: what makes present blocks durable. The store commits every entry every commit interval, and
// early once its entries stored `commitBytes` since the last commit (CacheStore.countTowardsCommit). A commit
// snapshots the present set, fdatasyncs the data and CRC files, and only then replaces the bitmap file with the
// snapshot (temp file, fsync, rename, fsync of the folder). So a bit never reaches the disk before its data, and a
// crash loses at most what was stored since the last commit (and the blocks still waiting for the writer, which
// were never present). The writer starts each block's writeback as it writes it, so the fdatasync finds little
// left to do, and no reader waits for a commit: commits run on the store's commit queue.

extension CacheEntry {
    /// Makes the present set durable: fdatasync data and CRCs, then atomically replace the bitmap file.
    /// Returns whether anything was written.
    @discardableResult
    func commit() throws(SystemError) -> Bool {
        try commitLock.withLock { _ throws(SystemError) -> Bool in
            let (snapshot, wasComplete) = state.withLock { state -> (BlockBitmap?, Bool) in
                guard state.changedSinceCommit else { return (nil, false) }
                state.changedSinceCommit = false
                let refetched = state.refetching && state.blocks.present.isFull
                if refetched { state.refetching = false }
                return (state.blocks.present, state.blocks.durable.isFull && !refetched)
            }
            guard let snapshot else { return false }
            do throws(SystemError) {
                try dataFile.synchronizeData()
                try crcFile.synchronizeData()
                let record = BitmapRecord(blockSize: blockSize, generation: header.generation, present: snapshot)
                try FileSystemCalls.replaceAtomically(directory + "/bitmap", with: record.encoded())
            } catch {
                state.withLock { $0.changedSinceCommit = true }
                throw error
            }
            state.withLock { $0.blocks.committed(snapshot) }
            // The whole file is durable now: its end-to-end check may read it.
            if snapshot.isFull && !wasComplete, let observe = store?.completions.withLock({ $0 }) { observe(self) }
            return true
        }
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
