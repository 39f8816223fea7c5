// Blocks loaded from an earlier run are trusted only after their CRC matches, checked the first time each is
// read: a torn write or a flipped sector turns into a refetch, never into wrong bytes. The check runs in place on
// the mapped pages, locked so that a page the disk cannot deliver is an error and never a SIGBUS; where locking
// fails, the span is read with one pread.
//
// Ahead of a sequential reader the checks run in the background (`verifyAhead`, on the store's verify queue), so
// that its READs find their blocks checked and are answered at once, while the CRCs run on another core. A READ
// still checks whatever is unchecked when it comes. (Checking on the READ's own thread cost a copy after a remount
// a quarter of its speed.) The background check ahead of a reader reads with pread rather than locking the
// mapping: mlock and munlock take the address space's lock for writing, which stalls the page faults of the
// replies meanwhile. The one-pass check of a whole file (CacheEntry+OnePassCheck.swift) locks 4 MiB at a time
// instead: there the saved copy measured more than the stalls.
import RangeFSSystem

extension CacheEntry {
    /// Checks blocks that came from disk (not from this process) against their CRC before they are first served;
    /// a mismatch makes the block absent so it is fetched again.
    /// `inPlace` checks the mapped pages (no copy); otherwise the span is read with pread, which takes no lock of
    /// the process's address space (mlock takes it for writing, and stalls the page faults of replies meanwhile).
    /// Returns how many blocks it checked and how many of them failed.
    @discardableResult
    func verifyLoadedBlocks(_ blocks: Range<Int>, inPlace: Bool = true) -> (checked: Int, failed: Int) {
        let unchecked = state.withLock { state in state.blocks.unverified(blocks).map { ($0, state.crcs[$0]) } }
        guard let first = unchecked.first?.0, let last = unchecked.last?.0 else { return (0, 0) }
        let span = byteRange(of: first..<(last + 1))
        let mismatches = { (raw: UnsafeRawBufferPointer) -> [Int] in
            unchecked.compactMap { index, expected in
                let range = self.byteRange(of: index..<(index + 1))
                let start = Int(range.lowerBound - span.lowerBound), end = start + Int(range.count)
                let good = end <= raw.count
                    // SAFETY: `end <= raw.count` is checked on the line before, and start < end.
                    && CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[start..<end])) == expected
                return good ? nil : index
            }
        }
        var failed: [Int]
        if inPlace, let checked = mapping?.withLockedBytes(span, mismatches) {
            failed = checked
        } else {
            do {
                // SAFETY: the bytes read are alive for the closure, which checks its bounds itself.
                failed = try dataFile.read(at: span.lowerBound, count: Int(span.count)).withUnsafeBytes(mismatches)
            } catch {
                logger.warning("cannot read cached blocks \(first)...\(last) of \(directory): \(error)")
                failed = unchecked.map(\.0)
            }
        }
        state.withLock { state in
            for (index, _) in unchecked where state.blocks.checked(index, matches: !failed.contains(index)) {
                state.changedSinceCommit = true
            }
        }
        for index in failed { logger.warning("cached block \(index) of \(directory) failed its CRC; fetching it again") }
        return (unchecked.count, failed.count)
    }

    /// Checks, in the background, the blocks of `range` that came from an earlier run and were not checked yet,
    /// in steps of 1 MiB.
    func verifyAhead(_ range: Range<UInt64>) {
        let blocks = self.blocks(covering: range)
        guard state.withLock({ !$0.blocks.unverified(blocks).isEmpty }) else { return }
        let step = max(1, (1 << 20) / blockSize)
        pipeline.verifyQueue.async { [self] in
            for start in stride(from: blocks.lowerBound, to: blocks.upperBound, by: step) {
                verifyLoadedBlocks(start..<min(blocks.upperBound, start + step), inPlace: false)
            }
        }
    }

    /// Checks every present block against its CRC now (`rangefs verify NAME` on a mount); blocks that fail become
    /// absent. Returns how many were checked and how many failed: the blocks really read and compared, not a
    /// count of the bitmap (a block that arrives meanwhile is checked on its first read instead).
    package func verifyAll() -> (checked: Int, failed: Int) {
        state.withLock { $0.blocks.forgetChecks() }
        let found = checkInOnePass()
        return (found.checked, found.failed)
    }
}
