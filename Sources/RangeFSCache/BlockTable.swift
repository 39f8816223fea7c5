// The block table of one cache entry: which blocks are present, held in memory, claimed, verified and durable,
// and which readers wait for which blocks. It is a pure value: `CacheEntry` keeps one under its mutex and does the
// I/O, this type decides. So every rule of the read and write paths is tested here without a file.
//
// A block's life:
//   absent ──claim──▶ in flight ──received──▶ in flight + in memory ──written──▶ present (+ verified)
//                         │                          └──write failed──▶ in memory only (never present)
//                         └──abandon──▶ absent (its waiters fail)
// A block is readable when it is present or in memory. A reader that finds some of its blocks unreadable waits;
// it claims those nobody is fetching, and it is woken once all of them are readable.

/// Called once when every awaited block is readable, or with why one of them will not come.
package typealias BlockWaiter = @Sendable (Result<Void, BlockFailure>) -> Void

/// Why blocks a reader waits for will not come, as the cache tells it. The cache knows no network: a failed
/// transfer's own error travels inside `failed`, for the reader's side to interpret.
package enum BlockFailure: Error, Sendable {
    /// This version of the file was replaced (the entry is stale): the reader's handle is stale too.
    case replaced
    /// The transfer was cancelled (the mount is stopping); not recorded as the file's last error.
    case cancelled
    /// The transfer failed: `reason` is what its fetcher reported, `message` the line status shows.
    case failed(any Error & Sendable, message: String)
}

/// The states of an entry's blocks and the readers waiting for them.
package struct BlockTable: Sendable {
    let blockCount: Int
    /// In the data file: written by this process, or durable from an earlier one.
    private(set) var present: BlockBitmap
    /// Held in memory: received and waiting for the writer, or unwritable (a full disk).
    private(set) var inMemory: BlockBitmap
    /// Claimed by a transfer, so nobody requests them twice; includes received blocks the writer has not written.
    private(set) var inFlight: BlockBitmap
    /// Matched their CRC since this process opened the entry. Blocks from an earlier run are checked first.
    private(set) var verified: BlockBitmap
    /// What the newest slot on disk says, as of the last commit.
    private(set) var durable: BlockBitmap
    /// Present blocks written with O_DIRECT (so not in the page cache) that no reply has asked for yet.
    private(set) var writtenDirectly: BlockBitmap
    private var waiters: [UInt64: Waiter] = [:]
    private var waitersByBlock: [Int: [UInt64]] = [:]
    private var nextWaiterID: UInt64 = 0

    private struct Waiter {
        var remaining: Int
        let resume: BlockWaiter
    }

    /// What `request` found.
    enum Request {
        /// Every block is readable now.
        case ready
        /// The waiter runs later; `claimed` are the runs nobody was fetching, now in flight: fetch them.
        case waiting(claimed: [Range<Int>])
    }

    /// A table whose present blocks are those the newest slot on disk holds.
    init(durable: BlockBitmap) {
        blockCount = durable.blockCount
        let empty = BlockBitmap(blockCount: durable.blockCount)
        present = durable
        self.durable = durable
        inMemory = empty
        inFlight = empty
        verified = empty
        writtenDirectly = empty
    }

    /// Nothing is awaited, in flight or held in memory: the table could be dropped and loaded again from disk.
    var isQuiet: Bool { waiters.isEmpty && inFlight.setCount == 0 && inMemory.setCount == 0 }

    func isReadable(_ index: Int) -> Bool { present.contains(index) || inMemory.contains(index) }

    /// Whether some reader waits for block `index`.
    func isAwaited(_ index: Int) -> Bool { waitersByBlock[index] != nil }

    /// Whether some reader waits for a block that nobody fetches and that is not readable: one a whole-file stream
    /// stored and the cap then evicted behind it, which only another stream brings back.
    var waitsForUnclaimedBlocks: Bool {
        waitersByBlock.keys.contains { !isReadable($0) && !inFlight.contains($0) }
    }

    // MARK: Claims and waiters

    /// Registers `waiter` for the unreadable blocks of `blocks` and claims those nobody fetches yet.
    mutating func request(_ blocks: Range<Int>, waiter: @escaping BlockWaiter) -> Request {
        let missing = blocks.filter { !isReadable($0) }
        if missing.isEmpty { return .ready }
        let id = nextWaiterID
        nextWaiterID += 1
        waiters[id] = Waiter(remaining: missing.count, resume: waiter)
        for index in missing { waitersByBlock[index, default: []].append(id) }
        return .waiting(claimed: claim(missing))
    }

    /// Claims the unreadable, unclaimed blocks of `blocks`, as runs; for readahead.
    mutating func claim(_ blocks: Range<Int>) -> [Range<Int>] {
        claim(blocks.filter { !isReadable($0) })
    }

    private mutating func claim(_ candidates: [Int]) -> [Range<Int>] {
        let claimed = candidates.filter { !inFlight.contains($0) }
        for index in claimed { inFlight.insert(index) }
        return Self.runs(of: claimed)
    }

    /// Claims the first run of unreadable, unclaimed blocks at or after `cursor` (wrapping around once), at most
    /// `limit` long; returns it with the cursor for the next call, or nil if there is none. For background fill.
    mutating func claimNextRun(from cursor: Int, limit: Int) -> (run: Range<Int>, next: Int)? {
        func isClaimable(_ index: Int) -> Bool { !isReadable(index) && !inFlight.contains(index) }
        for offset in 0..<blockCount {
            let index = (cursor + offset) % blockCount
            guard isClaimable(index) else { continue }
            var end = index
            while end < blockCount && end - index < limit && isClaimable(end) {
                inFlight.insert(end)
                end += 1
            }
            return (index..<end, end % blockCount)
        }
        return nil
    }

    /// Claims every block that is not present, for one whole-file stream.
    mutating func claimAllAbsent() {
        for index in 0..<blockCount where !present.contains(index) { inFlight.insert(index) }
    }

    /// Releases the claims on `blocks` without failing their readers; another transfer will bring them.
    mutating func releaseClaims(_ blocks: Range<Int>) {
        for index in blocks { inFlight.remove(index) }
    }

    /// Releases the claims on the absent blocks of `blocks`; returns the waiters of those blocks, which failed.
    mutating func abandon(_ blocks: Range<Int>) -> [BlockWaiter] {
        var failed: [BlockWaiter] = []
        for index in blocks where !present.contains(index) {
            inFlight.remove(index)
            for id in waitersByBlock.removeValue(forKey: index) ?? [] {
                if let waiter = waiters.removeValue(forKey: id) { failed.append(waiter.resume) }
            }
        }
        return failed
    }

    /// Removes every waiter (the entry went stale) and returns them, to be failed.
    mutating func removeAllWaiters() -> [BlockWaiter] {
        let all = waiters.values.map(\.resume)
        waiters = [:]
        waitersByBlock = [:]
        return all
    }

    // MARK: Arrival and writing

    /// Block `index` was received and is readable from memory; returns the waiters that now have all their blocks.
    mutating func received(_ index: Int) -> [BlockWaiter] {
        inMemory.insert(index)
        var ready: [BlockWaiter] = []
        for id in waitersByBlock.removeValue(forKey: index) ?? [] {
            guard var waiter = waiters[id] else { continue }
            waiter.remaining -= 1
            if waiter.remaining == 0 {
                waiters[id] = nil
                ready.append(waiter.resume)
            } else {
                waiters[id] = waiter
            }
        }
        return ready
    }

    /// Block `index` is in the data file with its CRC: present, and trusted.
    mutating func written(_ index: Int, directly: Bool) {
        inFlight.remove(index)
        inMemory.remove(index)
        present.insert(index)
        verified.insert(index)
        if directly { writtenDirectly.insert(index) }
    }

    /// Block `index` could not be written: readable from memory only, and no longer claimed.
    mutating func writeFailed(_ index: Int) {
        inFlight.remove(index)
    }

    /// Block `index` no longer counts: neither claimed nor held in memory (the entry went stale meanwhile).
    mutating func discard(_ index: Int) {
        inFlight.remove(index)
        inMemory.remove(index)
    }

    /// The memory copy of block `index` was dropped; unless present, it is absent again.
    mutating func droppedFromMemory(_ index: Int) {
        inMemory.remove(index)
    }

    /// The blocks of `blocks` written with O_DIRECT, which a reply must ask for first; each is returned once.
    mutating func takeWrittenDirectly(_ blocks: Range<Int>) -> [Int] {
        let taken = blocks.filter { present.contains($0) && writtenDirectly.contains($0) }
        for index in taken { writtenDirectly.remove(index) }
        return taken
    }

    // MARK: Verification, eviction, commits

    /// Present blocks of `blocks` not yet checked against their CRC in this process.
    func unverified(_ blocks: Range<Int>) -> [Int] {
        blocks.filter { present.contains($0) && !verified.contains($0) }
    }

    /// Records a CRC check of block `index`; a failed one makes the block absent. Returns whether the present set
    /// changed.
    @discardableResult
    mutating func checked(_ index: Int, matches: Bool) -> Bool {
        if matches {
            verified.insert(index)
            return false
        }
        return present.remove(index)
    }

    /// Forgets every check, so that the next reads check the blocks again (`rangefs verify`).
    mutating func forgetChecks() {
        verified = BlockBitmap(blockCount: blockCount)
    }

    /// Whether block `index` may be evicted: present, not claimed and not awaited.
    func isEvictable(_ index: Int) -> Bool {
        present.contains(index) && !inFlight.contains(index) && !isAwaited(index)
    }

    /// Block `index` was evicted: absent again.
    mutating func evicted(_ index: Int) {
        present.remove(index)
        verified.remove(index)
    }

    /// The newest slot on disk now holds `snapshot`.
    mutating func committed(_ snapshot: BlockBitmap) {
        durable = snapshot
    }

    /// Consecutive indexes joined into runs.
    package static func runs(of indexes: [Int]) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        for index in indexes {
            if let last = runs.last, last.upperBound == index {
                runs[runs.count - 1] = last.lowerBound..<(index + 1)
            } else {
                runs.append(index..<(index + 1))
            }
        }
        return runs
    }
}

/// How a file of `size` bytes is cut into blocks of `blockSize` bytes (the last one may be short).
package struct BlockGeometry: Sendable, Equatable {
    let blockSize: Int
    let size: UInt64

    init(blockSize: Int, size: UInt64) {
        self.blockSize = blockSize
        self.size = size
    }

    var blockCount: Int { Int((size + UInt64(blockSize) - 1) / UInt64(blockSize)) }

    /// The blocks that hold the bytes `range`.
    func blocks(covering range: Range<UInt64>) -> Range<Int> {
        guard !range.isEmpty else { return 0..<0 }
        let first = Int(range.lowerBound / UInt64(blockSize))
        let last = Int((min(range.upperBound, size) - 1) / UInt64(blockSize))
        return first..<(last + 1)
    }

    /// The bytes of `blocks`, clipped to the file's end.
    func byteRange(of blocks: Range<Int>) -> Range<UInt64> {
        let lower = min(size, UInt64(blocks.lowerBound) * UInt64(blockSize))
        let upper = min(size, UInt64(blocks.upperBound) * UInt64(blockSize))
        return lower..<upper
    }

    /// The length of block `index`.
    func length(ofBlock index: Int) -> Int {
        Int(byteRange(of: index..<(index + 1)).count)
    }

    /// The bytes that the blocks of `present` hold.
    func bytes(in present: BlockBitmap) -> UInt64 {
        var bytes = UInt64(present.setCount) * UInt64(blockSize)
        if blockCount > 0, present.contains(blockCount - 1) {
            bytes -= UInt64(blockCount) * UInt64(blockSize) - size
        }
        return bytes
    }
}
