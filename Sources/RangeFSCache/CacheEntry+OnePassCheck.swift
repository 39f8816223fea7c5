// The check of a complete file from an earlier run, at its open (issues 46 and 47). Its blocks are trusted only
// once they match their CRC (CacheEntry+Verification.swift). Checked one READ at a time, as they are read, a
// complete file was read through the daemon the first time after every remount, and never passed through to the
// kernel (passthrough needs every block checked): a copy after a remount ran at the daemon's speed, not the disk's.
//
// So an open of a complete file whose blocks are unchecked checks them all in one pass over the data file: large
// preads, in order, and one CRC32C per block; blocks that fail become absent, as a READ's check makes them, and
// are fetched again. A small file is checked before its open is answered, so that the open can pass it through
// and its READs find nothing left to check; a large one in the background, on the store's verify queue, so that
// a program that reads its first bytes does not wait for the whole file (its READs check what the pass has not
// reached yet, as before), and the next open passes it through.
//
// The pass over a large file checks the mapped pages in place, locked (a page the disk cannot deliver is an error, not a SIGBUS;
// where locking fails, the span is read with pread), as a READ's own check does. Reading into a buffer copied every
// byte once more for nothing: a copy after a remount replies from the same pages (issue 47: 0.24-0.25 daemon CPU
// seconds per 512 MiB instead of 0.28-0.32, medians of alternating pairs in three runs, the copy's time unchanged).
// A small file's pass reads it with pread (see `checkInOnePass`).

extension CacheEntry {
    /// Bytes one read of the pass covers: large enough that the disk sees few requests, small enough that a
    /// READ waiting on the state lock never waits behind much.
    static let onePassChunkBytes = 4 << 20

    /// Whether every block is present and some came from an earlier run and are unchecked: what the one-pass
    /// check is for.
    var awaitsOnePassCheck: Bool {
        state.withLock { state in
            !state.stale && state.blocks.present.isFull && !state.blocks.verified.isFull
        }
    }

    /// Checks every present block not checked in this process against its CRC, in one pass over the data file in
    /// spans of `onePassChunkBytes`, in place on the mapping; blocks that fail become absent (fetched again on their
    /// next read). Returns how many blocks it checked, how many failed, and how many spans of the data file it read.
    /// `while` is asked before each read: the pass stops once it says no.
    @discardableResult
    func checkInOnePass(while goOn: () -> Bool = { true }) -> (checked: Int, failed: Int, reads: Int) {
        let step = max(1, Self.onePassChunkBytes / blockSize)
        // A small file's bytes are read with one pread: locking them in place cost three more system calls
        // (mlock, munlock, and the advice that drops the page-table entries the lock made, which the reply's copy
        // then makes again), each taking the address space's lock for writing (issue 46: a re-read of small files
        // after a remount). The copy this saves a large file is worth them.
        let inPlace = size > EntryFiles.smallLimit
        var checked = 0, failed = 0, reads = 0
        for start in stride(from: 0, to: blockCount, by: step) {
            guard goOn() else { break }
            let found = verifyLoadedBlocks(start..<min(blockCount, start + step), inPlace: inPlace)
            checked += found.checked
            failed += found.failed
            if found.checked > 0 { reads += 1 }
        }
        return (checked, failed, reads)
    }

    /// At an open: if the file is complete and unchecked, checks it in one pass, now when it is at most
    /// `synchronousLimit` bytes long, else in the background on the verify queue while a handle of it is open:
    /// `file` or a thumbnailer that opens a cached 50 GB video for its first KiB must not cost 50 GB of disk reads.
    /// The next open goes on from the first block left unchecked.
    package func checkCompleteFileAtOpen(synchronousLimit: UInt64) {
        guard awaitsOnePassCheck else { return }
        if size <= synchronousLimit {
            checkInOnePass()
        } else {
            pipeline.verifyQueue.async { [self] in checkInOnePass { use.isHeld } }
        }
    }
}
