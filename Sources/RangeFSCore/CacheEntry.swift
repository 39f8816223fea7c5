// One remote file's local copy (format in CacheFormat.swift).
//
// Three sets of blocks live in memory under one mutex:
//   present   the block's bytes are in the data file (written by this process, or durable from an earlier one);
//   inFlight  some transfer has claimed the block, so nobody requests it twice;
//   verified  the block's bytes matched their CRC since this process opened the entry.
// and `durable`, the set the bitmap file on disk holds.
//
// A fetched block arrives in its own buffer (`accept`). Its waiters are answered from that buffer at once, and a
// writer thread writes it to the data file:
//   - blocks that readers asked for (demand and readahead) go through the page cache, where the next reads find
//     them, and reach the disk at the next group commit: a fast copy is not slowed by disk writes;
//   - background fill goes with O_DIRECT where the file system allows it, from the buffer straight to the disk:
//     no copy into the page cache, no dirty pages for a reader's commit to wait on, and no cache pollution.
//
// Durability order (DESIGN.md §3): a block is written and its CRC slot written, then it becomes `present`. A later
// group commit takes a snapshot of `present`, fdatasyncs the data and CRC files, and only then replaces the bitmap
// file with the snapshot. So a bit never reaches the disk before its data, and a crash loses at most one commit
// interval of progress (and the blocks still waiting to be written, which were never present).
//
// Blocks loaded from an earlier run are trusted only after their CRC matches, checked the first time each is read:
// a torn write or a flipped sector turns into a refetch, never into wrong bytes.
//
// When the disk is full (or a write fails), a fetched block is kept in memory instead: readers get its bytes, it
// is never marked present, and it is dropped first-in first-out beyond `memoryLimit` (a dropped block is simply
// absent again). When the remote file changes, the entry becomes stale: its waiters and every later read fail
// with `.remoteChanged`, and the store opens a fresh entry (in new files) for the new version.

import CChecksum
import Dispatch
import Glibc
import Logging
import Synchronization

/// The local copy of one remote file.
public final class CacheEntry: Sendable {
    public typealias Resume = @Sendable (Result<Void, FetchError>) -> Void

    public let header: CacheHeader
    public let directory: String
    private let dataFile: SystemFile
    private let crcFile: SystemFile
    /// The data file opened with O_DIRECT, for whole blocks; nil where the file system refuses it.
    private let directFile: SystemFile?
    /// Cleared when a direct write fails, after which every block is written through the page cache.
    private let directWrites: Atomic<Bool>
    /// The data file mapped read-only, so replies are copied by the kernel straight from the page cache.
    private let mapping: FileMapping?
    private let state: Mutex<State>
    /// Serialises commits so that an older snapshot never replaces a newer one. Lock order: commitLock, then state.
    private let commitLock = Mutex(())
    private let logger: Logger

    private struct Waiter {
        var remaining: Int
        let resume: Resume
    }

    /// A block received and not yet written; readers get its bytes from memory meanwhile.
    private struct Unwritten {
        let buffer: BlockBuffer
        let writeBackNow: Bool
        let stored: @Sendable (Bool) -> Void
    }

    /// What `request` found.
    public enum Availability: Equatable {
        /// Every block is readable now; call `reply(for:)`.
        case ready
        /// `whenReady` will run when they arrive or fail.
        case waiting
        /// Nothing will ever arrive for this version of the file.
        case failed(FetchError)
    }

    /// Where woken readers are answered.
    private static let replyQueue = DispatchQueue(label: "rangefs.replies", attributes: .concurrent)

    /// Bytes of blocks kept in memory because they could not be written, per entry.
    public static let memoryLimit = 64 << 20

    private struct State {
        var present: BlockBitmap
        var verified: BlockBitmap
        var inFlight: BlockBitmap
        var durable: BlockBitmap
        /// Present blocks written with O_DIRECT (so not in the page cache) that no reply has asked for yet.
        var writtenDirectly: BlockBitmap
        var crcs: [UInt32]
        var changedSinceCommit = false
        var commitRequested = false
        var bytesSinceCommit = 0
        var nextWaiterID: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        var waitersByBlock: [Int: [UInt64]] = [:]
        /// Blocks received and waiting for the writer (still in flight, not yet present).
        var unwritten: [Int: Unwritten] = [:]
        /// Whether the writer has this entry's unwritten blocks in hand.
        var writeScheduled = false
        /// Blocks that could not be written, oldest first.
        var memoryBlocks: [Int: BlockBuffer] = [:]
        var memoryOrder: [Int] = []
        var memoryBytes = 0
        var reportedWriteFailure = false
        /// The remote file changed: this entry serves nothing more.
        var stale = false
        /// The server ignores Range: blocks come from one whole-file stream.
        var rangeless = false
        /// The user paused this file's downloads (`rangefs pause`).
        var paused = false
        /// Why the last fetch failed, until one succeeds.
        var lastError: String?
        /// Bytes stored since the entry was opened, for download speed.
        var storedBytes: UInt64 = 0
        /// The store's clock value at each block's last use, for LRU eviction.
        var stamps: [UInt64] = []
        /// Blocks being copied to a reader right now; eviction leaves them alone.
        var serving: [Range<Int>] = []
        /// Pinned files are never evicted.
        var pinned = false
        /// Whether eviction already took blocks of this entry (logged once).
        var evictedBefore = false
        var streaming = false
    }

    public var blockSize: Int { header.blockSize }
    public var blockCount: Int { header.blockCount }
    public var size: UInt64 { header.size }

    init(header: CacheHeader, directory: String, dataFile: SystemFile, crcFile: SystemFile,
         durable: BlockBitmap, crcs: [UInt32], logger: Logger) {
        self.header = header
        self.directory = directory
        self.dataFile = dataFile
        self.crcFile = crcFile
        mapping = FileMapping(file: dataFile, count: Int(header.size))
        directFile = try? SystemFile(path: dataFile.path, flags: O_WRONLY | rfs_o_direct())
        directWrites = Atomic(directFile != nil)
        self.logger = logger
        let empty = BlockBitmap(blockCount: header.blockCount)
        var initial = State(present: durable, verified: empty, inFlight: empty, durable: durable,
                            writtenDirectly: empty, crcs: crcs)
        initial.stamps = Array(repeating: 0, count: header.blockCount)
        state = Mutex(initial)
    }

    // MARK: Geometry

    /// The blocks that hold the bytes `range`.
    public func blocks(covering range: Range<UInt64>) -> Range<Int> {
        guard !range.isEmpty else { return 0..<0 }
        let first = Int(range.lowerBound / UInt64(blockSize))
        let last = Int((min(range.upperBound, size) - 1) / UInt64(blockSize))
        return first..<(last + 1)
    }

    /// The bytes of `blocks`, clipped to the file's end.
    public func byteRange(of blocks: Range<Int>) -> Range<UInt64> {
        let lower = min(size, UInt64(blocks.lowerBound) * UInt64(blockSize))
        let upper = min(size, UInt64(blocks.upperBound) * UInt64(blockSize))
        return lower..<upper
    }

    /// The length of block `index` (the last one may be short).
    public func length(ofBlock index: Int) -> Int {
        Int(byteRange(of: index..<(index + 1)).count)
    }

    // MARK: Progress

    /// How many bytes are present locally.
    public var cachedBytes: UInt64 {
        state.withLock { state in
            var bytes = UInt64(state.present.setCount) * UInt64(blockSize)
            if blockCount > 0, state.present.contains(blockCount - 1) {
                bytes -= UInt64(blockCount) * UInt64(blockSize) - size
            }
            return bytes
        }
    }

    public var isComplete: Bool { state.withLock { $0.present.isFull } }

    /// A copy of the present set, for status displays and tests.
    public var presentBlocks: BlockBitmap { state.withLock { $0.present } }

    // MARK: Reading

    /// Makes sure `blocks` will be readable. If they already are, or can never be, says so (`whenReady` is then
    /// not called). Otherwise `whenReady` runs once they all arrive or one fails, and `claimed` receives the runs of
    /// blocks that nobody was fetching yet, now marked in flight: the caller must fetch them.
    public func request(blocks: Range<Int>, claimed: inout [Range<Int>], whenReady: @escaping Resume) -> Availability {
        verifyLoadedBlocks(blocks)
        return state.withLock { state in
            if state.stale { return .failed(.remoteChanged) }
            var missing: [Int] = []
            for index in blocks where !Self.isReadable(index, in: state) { missing.append(index) }
            if missing.isEmpty { return .ready }
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            state.waiters[id] = Waiter(remaining: missing.count, resume: whenReady)
            for index in missing { state.waitersByBlock[index, default: []].append(id) }
            claimed = Self.claim(missing, in: &state)
            return .waiting
        }
    }

    private static func isReadable(_ index: Int, in state: State) -> Bool {
        state.present.contains(index) || state.unwritten[index] != nil || state.memoryBlocks[index] != nil
    }

    /// How to answer a read of `range` whose blocks are readable: straight from the data file when all are on
    /// disk, else in segments from the file's mapping and from the buffers of blocks held in memory (or as bytes
    /// gathered from both, if the file is not mapped). Nil if a memory block was dropped meanwhile.
    ///
    /// Blocks that fill wrote with O_DIRECT are first asked for with WILLNEED, once: the kernel copies the reply
    /// out of the mapping, and a page not in the page cache is then faulted in on its own, one synchronous 4 KiB
    /// read per page once the mapping's readahead gives up. A cold copy that met fill's blocks ran at a third of
    /// its speed. Other blocks are in the page cache, or come there ahead of a sequential reader through
    /// `prefetchFromDisk` (advising every reply of a warm copy cost it a tenth of its speed).
    public func reply(for range: Range<UInt64>) -> ReadReply? {
        let blocks = self.blocks(covering: range)
        let (fromMemory, uncached) = state.withLock { state -> ([Int: BlockBuffer]?, [Int]) in
            var buffers: [Int: BlockBuffer] = [:]
            var uncached: [Int] = []
            for index in blocks {
                if state.present.contains(index) {
                    if state.writtenDirectly.contains(index) { uncached.append(index) }
                    continue
                }
                guard let buffer = state.unwritten[index]?.buffer ?? state.memoryBlocks[index] else {
                    return (nil, [])
                }
                buffers[index] = buffer
            }
            for index in uncached { state.writtenDirectly.remove(index) }
            return (buffers, uncached)
        }
        guard let fromMemory else { return nil }
        if mapping != nil {
            for run in Self.runs(of: uncached) { dataFile.adviseWillNeed(byteRange(of: run)) }
        }
        if fromMemory.isEmpty {
            if let mapping {
                return .mapped(address: mapping.address + UInt(range.lowerBound), count: Int(range.count))
            }
            return .file(descriptor: dataFile.descriptor, offset: range.lowerBound, count: Int(range.count))
        }
        // Each block's part of `range`, with where it starts inside the block.
        let parts = blocks.map { index -> (Int, Range<UInt64>, Int) in
            let blockRange = byteRange(of: index..<(index + 1))
            let wanted = range.clamped(to: blockRange)
            return (index, wanted, Int(wanted.lowerBound - blockRange.lowerBound))
        }
        if let mapping {
            var segments: [ReplySegment] = []
            for (index, wanted, start) in parts {
                if let buffer = fromMemory[index] {
                    segments.append(ReplySegment(address: UInt(bitPattern: buffer.address) + UInt(start),
                                                 count: Int(wanted.count), owner: buffer))
                } else if let last = segments.last, last.owner == nil,
                          last.address + UInt(last.count) == mapping.address + UInt(wanted.lowerBound) {
                    segments[segments.count - 1].count += Int(wanted.count)
                } else {
                    segments.append(ReplySegment(address: mapping.address + UInt(wanted.lowerBound),
                                                 count: Int(wanted.count), owner: nil))
                }
            }
            return .segments(segments)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(range.count))
        for (index, wanted, start) in parts {
            if let buffer = fromMemory[index] {
                bytes += buffer.bytes[start..<(start + Int(wanted.count))]
            } else {
                guard let read = try? dataFile.read(at: wanted.lowerBound, count: Int(wanted.count)),
                      read.count == Int(wanted.count)
                else { return nil }
                bytes += read
            }
        }
        return .bytes(bytes)
    }

    /// Claims the first run of absent, unclaimed blocks at or after `cursor` (wrapping around once), at most
    /// `limit` long; returns it with the cursor for the next call, or nil if there is none. For background fill.
    public func claimNextRun(from cursor: Int, limit: Int) -> (Range<Int>, Int)? {
        state.withLock { state in
            guard !state.stale, blockCount > 0 else { return nil }
            for offset in 0..<blockCount {
                let index = (cursor + offset) % blockCount
                guard !Self.isReadable(index, in: state), !state.inFlight.contains(index) else { continue }
                var end = index
                while end < blockCount && end - index < limit && !Self.isReadable(end, in: state)
                        && !state.inFlight.contains(end) {
                    state.inFlight.insert(end)
                    end += 1
                }
                return (index..<end, end % blockCount)
            }
            return nil
        }
    }

    /// Marks the absent, unclaimed blocks of `blocks` in flight and returns them as runs; for readahead and fill.
    public func claim(blocks: Range<Int>) -> [Range<Int>] {
        state.withLock { state in
            state.stale ? [] : Self.claim(blocks.filter { !Self.isReadable($0, in: state) }, in: &state)
        }
    }

    private static func claim(_ candidates: [Int], in state: inout State) -> [Range<Int>] {
        let claimed = candidates.filter { !state.inFlight.contains($0) }
        for index in claimed { state.inFlight.insert(index) }
        return runs(of: claimed)
    }

    /// Starts reading the cached bytes of `range` from disk in the background, so that a sequential reader's
    /// next blocks (and their CRC checks) come from the page cache. Only present blocks are read: asking for a
    /// hole would fill the page cache with zero pages that the block's arrival then has to overwrite (on a cold
    /// copy that cost a tenth of the daemon's time).
    public func prefetchFromDisk(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        let runs = state.withLock { state in
            Self.runs(of: blocks(covering: range).filter { state.present.contains($0) })
        }
        for run in runs { dataFile.adviseWillNeed(byteRange(of: run).clamped(to: range)) }
    }

    /// Consecutive indexes joined into runs.
    private static func runs(of indexes: [Int]) -> [Range<Int>] {
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

    /// Reads present bytes with `pread`.
    public func readPresent(_ range: Range<UInt64>) throws(SystemError) -> [UInt8] {
        try dataFile.read(at: range.lowerBound, count: Int(range.count))
    }

    /// Checks blocks that came from disk (not from this process) against their CRC before they are first served;
    /// a mismatch makes the block absent so it is fetched again. The unchecked span is read with one pread.
    private func verifyLoadedBlocks(_ blocks: Range<Int>) {
        let unchecked = state.withLock { state in
            blocks.filter { state.present.contains($0) && !state.verified.contains($0) }.map { ($0, state.crcs[$0]) }
        }
        guard let first = unchecked.first?.0, let last = unchecked.last?.0 else { return }
        let span = byteRange(of: first..<(last + 1))
        let mismatches = { (raw: UnsafeRawBufferPointer) -> [Int] in
            unchecked.compactMap { index, expected in
                let range = self.byteRange(of: index..<(index + 1))
                let start = Int(range.lowerBound - span.lowerBound), end = start + Int(range.count)
                let good = end <= raw.count
                    && CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[start..<end])) == expected
                return good ? nil : index
            }
        }
        var failed: [Int]
        // Checked in place where the pages can be locked (no copy); else read with one pread.
        if let inPlace = mapping?.withLockedBytes(span, mismatches) {
            failed = inPlace
        } else {
            do {
                failed = try dataFile.read(at: span.lowerBound, count: Int(span.count)).withUnsafeBytes(mismatches)
            } catch {
                logger.warning("cannot read cached blocks \(first)...\(last) of \(directory): \(error)")
                failed = unchecked.map(\.0)
            }
        }
        state.withLock { state in
            for (index, _) in unchecked {
                if failed.contains(index) {
                    if state.present.remove(index) { state.changedSinceCommit = true }
                } else {
                    state.verified.insert(index)
                }
            }
        }
        for index in failed { logger.warning("cached block \(index) of \(directory) failed its CRC; fetching it again") }
    }

    // MARK: Storing

    /// Takes one whole block fetched from the origin. Its readers are answered from `buffer` at once; the writer
    /// thread then writes it (and its CRC slot) to the cache, and only then is the block present. `stored` runs on
    /// the writer after that, with whether the block is now in the cache. If it fails (a full disk), the block is kept in
    /// memory for its readers and never marked present. Waits while too many received bytes wait to be written.
    /// Returns false, keeping nothing, if the block brings nothing new (the entry is stale, or it is here already).
    /// `writeBackNow` marks background fill, which goes to the disk at once (see `write`).
    @discardableResult
    public func accept(block index: Int, buffer: BlockBuffer, writeBackNow: Bool = false,
                       stored: @escaping @Sendable (Bool) -> Void = { _ in }) -> Bool {
        precondition(buffer.count == length(ofBlock: index), "block \(index) must be stored whole")
        // Claims never overlap, so only a race could bring a block twice.
        let nothingNew = state.withLock { state -> Bool in
            guard state.stale || state.present.contains(index) || state.unwritten[index] != nil else { return false }
            if state.unwritten[index] == nil { state.inFlight.remove(index) }
            return true
        }
        if nothingNew { return false }
        WriteBudget.take(buffer.count)
        let (ready, startWriter) = state.withLock { state -> ([Resume], Bool) in
            state.unwritten[index] = Unwritten(buffer: buffer, writeBackNow: writeBackNow, stored: stored)
            Self.dropFromMemory(index, in: &state)
            defer { state.writeScheduled = true }
            return (Self.wake(block: index, in: &state), !state.writeScheduled)
        }
        // Readers are answered on the reply queue, not here: this runs on the fetcher's thread, which should go
        // back to receiving (a reply copies up to 1 MiB into the kernel).
        for resume in ready { Self.replyQueue.async { resume(.success(())) } }
        if startWriter { Self.writerQueue.async { self.writeUnwritten() } }
        return true
    }

    /// Stores one whole block now, on this thread: `accept`, then wait for the writer. Returns whether the block
    /// is now in the cache.
    @discardableResult
    public func store(block index: Int, bytes: UnsafeRawBufferPointer, writeBackNow: Bool = false) -> Bool {
        guard accept(block: index, buffer: BlockBuffer(copying: bytes), writeBackNow: writeBackNow) else { return false }
        Self.waitForWrites()
        return isPresent(index)
    }

    /// Where received blocks are written, for every entry: one thread, so the disk sees few, large writes.
    private static let writerQueue = DispatchQueue(label: "rangefs.cache-writer")

    /// Returns once every block accepted so far is written (or failed to be).
    public static func waitForWrites() { writerQueue.sync {} }

    /// The most one write takes: consecutive blocks waiting together are written with one pwritev.
    private static let writeBytes = 1 << 20

    /// Runs on the writer: writes this entry's unwritten blocks, lowest first, in runs of consecutive blocks.
    private func writeUnwritten() {
        while true {
            let run = state.withLock { state -> [(Int, Unwritten)] in
                guard let first = state.unwritten.keys.min(), let background = state.unwritten[first]?.writeBackNow
                else {
                    state.writeScheduled = false
                    return []
                }
                // A run is all fill (written directly) or all readers' blocks (through the page cache).
                var run: [(Int, Unwritten)] = []
                var bytes = 0
                while let item = state.unwritten[first + run.count], bytes < Self.writeBytes,
                      item.writeBackNow == background {
                    run.append((first + run.count, item))
                    bytes += item.buffer.count
                }
                return run
            }
            if run.isEmpty { return }
            write(run)
        }
    }

    /// Writes consecutive blocks and their CRC slots, then marks them present (or keeps them in memory if the
    /// write failed). Background fill goes to the disk at once: with O_DIRECT, or else through the page cache
    /// with its writeback started here. Readers' blocks stay in the page cache until the group commit.
    private func write(_ run: [(Int, Unwritten)]) {
        let first = run[0].0
        let range = byteRange(of: first..<(first + run.count))
        let buffers = run.map(\.1.buffer)
        let background = run[0].1.writeBackNow
        let crcs = buffers.map { CRC32C.checksum($0.bytes) }
        var failure: SystemError?
        var wroteDirectly = false
        do throws(SystemError) {
            wroteDirectly = try writeData(buffers, at: range.lowerBound, direct: background)
            if !wroteDirectly && background {
                dataFile.startWriteback(range)
            }
            var slots = ByteWriter()
            for crc in crcs { slots.write(crc) }
            try crcFile.write(slots.bytes, at: UInt64(first) * 4)
        } catch {
            failure = error
        }
        let (firstFailure, stale) = state.withLock { state -> (Bool, Bool) in
            var firstFailure = false
            for ((index, item), crc) in zip(run, crcs) {
                state.unwritten[index] = nil
                state.inFlight.remove(index)
                guard !state.stale else { continue }
                if failure == nil {
                    state.present.insert(index)
                    state.verified.insert(index)
                    if wroteDirectly { state.writtenDirectly.insert(index) }
                    state.crcs[index] = crc
                    state.changedSinceCommit = true
                    state.bytesSinceCommit += item.buffer.count
                    state.storedBytes += UInt64(item.buffer.count)
                    state.lastError = nil
                } else {
                    firstFailure = firstFailure || !state.reportedWriteFailure
                    state.reportedWriteFailure = true
                    Self.keepInMemory(index, item.buffer, in: &state)
                }
            }
            return (firstFailure, state.stale)
        }
        WriteBudget.giveBack(buffers.reduce(0) { $0 + $1.count })
        if let failure, firstFailure {
            let advice = failure.isNoSpace ? "the cache disk is full; free space or use --cache on a larger disk"
                : "check the cache disk"
            logger.error("cannot write \(directory)/data (\(failure)): serving fetched blocks from memory without caching them; \(advice)")
        }
        for (_, item) in run { item.stored(failure == nil && !stale) }
    }

    /// Writes `buffers` back to back at `offset`: if `direct`, with O_DIRECT when every length is a multiple of
    /// the page size (falling back to the page cache for good if the file system refuses), else through the page
    /// cache. Returns whether the write was direct.
    private func writeData(_ buffers: [BlockBuffer], at offset: UInt64, direct: Bool) throws(SystemError) -> Bool {
        if direct, let directFile, directWrites.load(ordering: .relaxed),
           buffers.allSatisfy({ $0.count % BlockBuffer.alignment == 0 }) {
            do {
                try directFile.write(buffers.map(\.bytes), at: offset)
                return true
            } catch where error.errno == EINVAL {
                directWrites.store(false, ordering: .relaxed)
                logger.notice("\(directory): direct writes refused (\(error)); writing through the page cache")
            }
        }
        try dataFile.write(buffers.map(\.bytes), at: offset)
        return false
    }

    private static func wake(block index: Int, in state: inout State) -> [Resume] {
        var ready: [Resume] = []
        for id in state.waitersByBlock.removeValue(forKey: index) ?? [] {
            guard var waiter = state.waiters[id] else { continue }
            waiter.remaining -= 1
            if waiter.remaining == 0 {
                state.waiters[id] = nil
                ready.append(waiter.resume)
            } else {
                state.waiters[id] = waiter
            }
        }
        return ready
    }

    private static func keepInMemory(_ index: Int, _ bytes: BlockBuffer, in state: inout State) {
        dropFromMemory(index, in: &state)
        state.memoryBlocks[index] = bytes
        state.memoryOrder.append(index)
        state.memoryBytes += bytes.count
        while state.memoryBytes > memoryLimit, let oldest = state.memoryOrder.first {
            dropFromMemory(oldest, in: &state)
        }
    }

    private static func dropFromMemory(_ index: Int, in state: inout State) {
        guard let bytes = state.memoryBlocks.removeValue(forKey: index) else { return }
        state.memoryBytes -= bytes.count
        state.memoryOrder.removeAll { $0 == index }
    }

    /// Whether a block could not be written since the entry was opened (a full disk): background fill stops.
    public var hasWriteFailure: Bool { state.withLock { $0.reportedWriteFailure } }


    /// Releases the claim on the absent blocks of `blocks` and fails every reader waiting for one of them.
    public func abandon(blocks: Range<Int>, error: FetchError) {
        let failed = state.withLock { state -> [Resume] in
            if error != .cancelled { state.lastError = error.userMessage }
            var failed: [Resume] = []
            for index in blocks where !state.present.contains(index) {
                state.inFlight.remove(index)
                for id in state.waitersByBlock.removeValue(forKey: index) ?? [] {
                    if let waiter = state.waiters.removeValue(forKey: id) { failed.append(waiter.resume) }
                }
            }
            return failed
        }
        for resume in failed { resume(.failure(error)) }
    }

    /// Releases the claim on `blocks` without failing their readers; another transfer will bring them.
    public func releaseClaims(_ blocks: Range<Int>) {
        state.withLock { state in
            for index in blocks { state.inFlight.remove(index) }
        }
    }

    /// Marks this version of the file as replaced: every waiting reader fails with `.remoteChanged`, and so
    /// does every later request. Returns false if it already was stale.
    @discardableResult
    public func markStale() -> Bool {
        let (failed, changed) = state.withLock { state -> ([Resume], Bool) in
            guard !state.stale else { return ([], false) }
            state.stale = true
            let failed = state.waiters.values.map(\.resume)
            state.waiters = [:]
            state.waitersByBlock = [:]
            state.memoryBlocks = [:]
            state.memoryOrder = []
            state.memoryBytes = 0
            return (failed, true)
        }
        for resume in failed { resume(.failure(.remoteChanged)) }
        return changed
    }

    public var isStale: Bool { state.withLock { $0.stale } }

    /// Whether the user paused this file's downloads.
    public var isPaused: Bool { state.withLock { $0.paused } }
    public func setPaused(_ paused: Bool) { state.withLock { $0.paused = paused } }

    /// Why the last fetch failed, until one succeeds.
    public var lastError: String? { state.withLock { $0.lastError } }

    /// Bytes stored since the entry was opened.
    public var storedBytes: UInt64 { state.withLock { $0.storedBytes } }

    /// Checks every present block against its CRC now (`rangefs verify NAME` on a mount); blocks that fail become
    /// absent. Returns how many were checked and how many failed.
    public func verifyAll() -> (checked: Int, failed: Int) {
        state.withLock { state in
            for index in 0..<state.present.blockCount where state.present.contains(index) { state.verified.remove(index) }
        }
        let before = presentBlocks.setCount
        let chunk = max(1, (1 << 20) / blockSize)
        for start in stride(from: 0, to: blockCount, by: chunk) { verifyLoadedBlocks(start..<min(blockCount, start + chunk)) }
        return (before, before - presentBlocks.setCount)
    }

    /// Whether the server ignores Range for this file, so it must be streamed whole.
    public var isRangeless: Bool { state.withLock { $0.rangeless } }

    public func markRangeless() { state.withLock { $0.rangeless = true } }

    /// Claims every absent block for one whole-file stream, unless a stream is already running.
    /// Returns false when one is.
    func beginStream() -> Bool {
        state.withLock { state in
            guard !state.streaming, !state.stale else { return false }
            state.streaming = true
            for index in 0..<state.present.blockCount where !state.present.contains(index) {
                state.inFlight.insert(index)
            }
            return true
        }
    }

    func endStream() { state.withLock { $0.streaming = false } }

    public func isPresent(_ index: Int) -> Bool { state.withLock { $0.present.contains(index) } }

    /// Marks an early commit as requested; false if one already is.
    func requestCommit() -> Bool {
        state.withLock { state in
            defer { state.commitRequested = true }
            return !state.commitRequested
        }
    }

    // MARK: Eviction

    public var isPinned: Bool { state.withLock { $0.pinned } }
    public func setPinned(_ pinned: Bool) { state.withLock { $0.pinned = pinned } }

    /// Records that `blocks` were used at `stamp` (the store's clock), for LRU eviction.
    func touch(_ blocks: Range<Int>, stamp: UInt64) {
        state.withLock { state in for index in blocks { state.stamps[index] = stamp } }
    }

    /// The stamp of block `index`, to tell a current LRU record from an outdated one.
    func stamp(of index: Int) -> UInt64 { state.withLock { $0.stamps[index] } }

    /// Marks `range` as being copied to a reader (the reply reads the data file), so eviction skips it.
    func beginServing(_ range: Range<Int>) { state.withLock { $0.serving.append(range) } }

    func endServing(_ range: Range<Int>) {
        state.withLock { state in
            if let index = state.serving.firstIndex(of: range) { state.serving.remove(at: index) }
        }
    }

    /// Drops block `index` from the cache if nothing uses it: not pinned, not in flight, not awaited, not being
    /// served, and still last used at `stamp`. The hole is punched under the lock, so a refetch of the block cannot
    /// be overwritten by it. The bitmap on disk catches up at the next commit; if a crash comes first, the block
    /// reads as zeros, fails its CRC and is fetched again. Returns the bytes freed.
    func evict(_ index: Int, stamp: UInt64) -> Int {
        state.withLock { state -> Int in
            guard !state.pinned, !state.stale, state.stamps[index] == stamp, state.present.contains(index),
                  !state.inFlight.contains(index), state.waitersByBlock[index] == nil,
                  !state.serving.contains(where: { $0.contains(index) })
            else { return 0 }
            let range = byteRange(of: index..<(index + 1))
            do {
                try dataFile.punchHole(range)
            } catch {
                logger.warning("cannot free block \(index) of \(directory): \(error)")
                return 0
            }
            state.present.remove(index)
            state.verified.remove(index)
            state.changedSinceCommit = true
            if !state.evictedBefore {
                state.evictedBefore = true
                logger.notice("dropping least recently used blocks of \(Redaction.redact(header.url)) to stay under --cache-max-size; they are fetched again when read")
            }
            return Int(range.count)
        }
    }

    /// Bytes stored since the last commit; the store commits early when this grows large.
    public var bytesSinceCommit: Int { state.withLock { $0.bytesSinceCommit } }

    // MARK: Committing

    /// Makes the present set durable: fdatasync data and CRCs, then atomically replace the bitmap file.
    /// Returns whether anything was written.
    @discardableResult
    public func commit() throws(SystemError) -> Bool {
        try commitLock.withLock { _ throws(SystemError) -> Bool in
            let snapshot = state.withLock { state -> BlockBitmap? in
                state.commitRequested = false
                guard state.changedSinceCommit else { return nil }
                state.changedSinceCommit = false
                state.bytesSinceCommit = 0
                return state.present
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
            state.withLock { $0.durable = snapshot }
            return true
        }
    }

    /// What the bitmap file on disk says, as of the last commit.
    public var durableBlocks: BlockBitmap { state.withLock { $0.durable } }
}
