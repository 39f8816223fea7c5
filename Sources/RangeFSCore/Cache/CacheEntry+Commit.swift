// The group commit: what makes present blocks durable. The store calls `commit` every commit interval, and early
// through `commitSoon` once `bytesSinceCommit` passes its byte threshold. A commit snapshots the present set,
// fdatasyncs the data and CRC files, and only then replaces the bitmap file with the snapshot (temp file, fsync,
// rename, fsync of the folder). So a bit never reaches the disk before its data, and a crash loses at most what
// was stored since the last commit (and the blocks still waiting for the writer, which were never present).

/// What changed since the last commit.
struct CommitState {
    var changedSinceCommit = false
    var commitRequested = false
    var bytesSinceCommit = 0

    /// `bytes` more are present (or the present set changed otherwise, with 0).
    mutating func changed(bytes: Int = 0) {
        changedSinceCommit = true
        bytesSinceCommit += bytes
    }
}

extension CacheEntry {
    /// Makes the present set durable: fdatasync data and CRCs, then atomically replace the bitmap file.
    /// Returns whether anything was written.
    @discardableResult
    public func commit() throws(SystemError) -> Bool {
        try commitLock.withLock { _ throws(SystemError) -> Bool in
            let snapshot = state.withLock { state -> BlockBitmap? in
                state.commit.commitRequested = false
                guard state.commit.changedSinceCommit else { return nil }
                state.commit = CommitState()
                return state.blocks.present
            }
            guard let snapshot else { return false }
            do throws(SystemError) {
                try dataFile.synchronizeData()
                try crcFile.synchronizeData()
                let record = BitmapRecord(blockSize: blockSize, generation: header.generation, present: snapshot)
                try FileSystemCalls.replaceAtomically(directory + "/bitmap", with: record.encoded())
            } catch {
                state.withLock { $0.commit.changed() }
                throw error
            }
            state.withLock { $0.blocks.committed(snapshot) }
            return true
        }
    }

    /// Marks an early commit as requested; false if one already is.
    func requestCommit() -> Bool {
        state.withLock { state in
            defer { state.commit.commitRequested = true }
            return !state.commit.commitRequested
        }
    }

    /// Bytes stored since the last commit; the store commits early when this grows large.
    public var bytesSinceCommit: Int { state.withLock { $0.commit.bytesSinceCommit } }

    /// What the bitmap file on disk says, as of the last commit.
    public var durableBlocks: BlockBitmap { state.withLock { $0.blocks.durable } }
}
