// A fetched block's way into the cache.
//
// A block arrives in its own buffer (`accept`). Its waiters are answered from that buffer at once, and the store's
// writer thread writes it to the data file:
//   - blocks that readers asked for (demand and readahead) go through the page cache, where the next reads find
//     them, and, but for a small file's, their writeback starts at once (sync_file_range), so they reach the disk
//     at the disk's pace and the next group commit's fdatasync has little left to do;
//   - background fill goes with O_DIRECT where the file system allows it, from the buffer straight to the disk:
//     no copy into the page cache, no dirty pages for a reader's commit to wait on, and no cache pollution.
// Only once its bytes and CRC slot are written is a block present (the durability order of CacheEntry.swift).
//
// When the disk is full (or a write fails), a fetched block is kept in memory instead: readers get its bytes, it
// is never marked present, and it is dropped first-in first-out beyond the store's `memoryBlockLimit` (a dropped
// block is simply absent again).

import Glibc
import RangeFSSystem

/// A block received and not yet written; readers get its bytes from memory meanwhile.
struct Unwritten {
    let buffer: BlockBuffer
    let writeBackNow: Bool
    /// The write budget the block took room in, given back once it is written.
    let budget: WriteBudget
    let stored: @Sendable (Bool) -> Void
}

/// Blocks that could not be written, oldest first, within a byte limit.
struct MemoryBlocks {
    private(set) var buffers: [Int: BlockBuffer] = [:]
    private var order: [Int] = []
    private var bytes = 0
    /// Whether a write failed since the entry was opened (logged once; background fill stops).
    var reportedWriteFailure = false

    subscript(index: Int) -> BlockBuffer? { buffers[index] }

    /// Keeps `buffer` as block `index`; returns the blocks dropped to stay within `limit` (possibly `index`).
    mutating func keep(_ index: Int, _ buffer: BlockBuffer, limit: Int) -> [Int] {
        drop(index)
        buffers[index] = buffer
        order.append(index)
        bytes += buffer.count
        var dropped: [Int] = []
        while bytes > limit, let oldest = order.first {
            drop(oldest)
            dropped.append(oldest)
        }
        return dropped
    }

    mutating func drop(_ index: Int) {
        guard let buffer = buffers.removeValue(forKey: index) else { return }
        bytes -= buffer.count
        order.removeAll { $0 == index }
    }

    /// Drops every block; returns their indexes.
    mutating func removeAll() -> [Int] {
        defer { self = MemoryBlocks(reportedWriteFailure: reportedWriteFailure) }
        return Array(buffers.keys)
    }
}

extension CacheEntry {
    /// Takes one whole block fetched from the origin. Its readers are answered from `buffer` at once; the writer
    /// thread then writes it (and its CRC slot) to the cache, and only then is the block present. `stored` runs on
    /// the writer after that, with whether the block is now in the cache. If it fails (a full disk), the block is
    /// kept in memory for its readers and never marked present. Returns false, keeping nothing, if the block brings
    /// nothing new (the entry is stale, or it is here already). `writeBackNow` marks background fill, which goes to
    /// the disk at once (see `write`).
    ///
    /// The calling thread then waits while too many received bytes wait to be written: when the disk falls behind,
    /// receiving waits for it. It waits only after the block's readers were woken, and a reader's own blocks
    /// (`budgeted` false: demand) have a budget of their own, so that readahead and fill never hold them up.
    @discardableResult
    func accept(block index: Int, buffer: BlockBuffer, writeBackNow: Bool = false, budgeted: Bool = true,
                       stored: @escaping @Sendable (Bool) -> Void = { _ in }) -> Bool {
        precondition(buffer.count == length(ofBlock: index), "block \(index) must be stored whole")
        let budget = budgeted ? pipeline.writeBudget : pipeline.demandBudget
        let (accepted, ready, startWriter) = state.withLock { state -> (Bool, [BlockWaiter], Bool) in
            // Claims never overlap, so only a race could bring a block twice.
            if state.stale || state.blocks.present.contains(index) || state.unwritten[index] != nil {
                if state.unwritten[index] == nil { state.blocks.releaseClaims(index..<(index + 1)) }
                return (false, [], false)
            }
            state.unwritten[index] = Unwritten(buffer: buffer, writeBackNow: writeBackNow, budget: budget,
                                               stored: stored)
            state.memory.drop(index)
            defer { state.writeScheduled = true }
            return (true, state.blocks.received(index), !state.writeScheduled)
        }
        guard accepted else { return false }
        use.noteActivity()
        // The writer is scheduled before readers are answered, so a reader that then waits for the writes finds
        // this block among them.
        if startWriter { pipeline.writerQueue.async { self.writeUnwritten() } }
        // Readers are answered on the reply queue, not here: this runs on the fetcher's thread, which should go
        // back to receiving (a reply copies up to 1 MiB into the kernel).
        for resume in ready { pipeline.replyQueue.async { resume(.success(())) } }
        budget.take(buffer.count)
        return true
    }

    /// Stores one whole block now, on this thread: `accept`, then wait for the writer. Returns whether the block
    /// is now in the cache.
    @discardableResult
    func store(block index: Int, bytes: UnsafeRawBufferPointer, writeBackNow: Bool = false) -> Bool {
        let buffer = BlockBuffer(copying: bytes)
        guard accept(block: index, buffer: buffer, writeBackNow: writeBackNow) else { return false }
        waitForWrites()
        return isPresent(index)
    }

    /// Returns once every block accepted so far (by any entry of the store) is written, or failed to be.
    func waitForWrites() { pipeline.waitForWrites() }

    /// Whether a block could not be written since the entry was opened (a full disk): background fill stops.
    var hasWriteFailure: Bool { state.withLock { $0.memory.reportedWriteFailure } }

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
    /// write failed). Background fill goes to the disk with O_DIRECT where it can; everything else goes through the
    /// page cache with its writeback started here.
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
            // A small file's few KiB go with the group commit's syncfs: a writeback started for each cost a cold
            // read of small files a flush request per file (issue 46; the bench's strace counted 1.08 per file).
            if !wroteDirectly && !isSmall { dataFile.startWriteback(range) }
            var slots = ByteWriter()
            for crc in crcs { slots.write(crc) }
            try metaFile.write(slots.bytes, at: crcOffset(ofBlock: first))
        } catch {
            failure = error
        }
        let now = MonotonicClock.seconds()
        let (firstFailure, stale) = state.withLock { state -> (Bool, Bool) in
            var firstFailure = false
            for ((index, item), crc) in zip(run, crcs) {
                state.unwritten[index] = nil
                guard !state.stale else {
                    state.blocks.discard(index)
                    continue
                }
                if failure == nil {
                    state.blocks.written(index, directly: wroteDirectly)
                    state.crcs[index] = crc
                    state.changedSinceCommit = true
                    state.storedBytes += UInt64(item.buffer.count)
                    state.storeRate.add(UInt64(item.buffer.count), at: now)
                    state.lastError = nil
                } else {
                    firstFailure = firstFailure || !state.memory.reportedWriteFailure
                    state.memory.reportedWriteFailure = true
                    state.blocks.writeFailed(index)
                    for dropped in state.memory.keep(index, item.buffer, limit: pipeline.memoryBlockLimit)
                    where state.unwritten[dropped] == nil {
                        state.blocks.droppedFromMemory(dropped)
                    }
                }
            }
            return (firstFailure, state.stale)
        }
        for (_, item) in run { item.budget.giveBack(item.buffer.count) }
        ledger.noteWrite(failure: failure, bytes: buffers.reduce(0) { $0 + $1.count })
        if let failure, firstFailure {
            let advice = failure.isNoSpace ? "the cache disk is full; free space or use --cache on a larger disk"
                : "check the cache disk"
            logger.error("cannot write \(dataPath) (\(failure)): serving fetched blocks from memory without caching them; \(advice)")
        }
        for (_, item) in run { item.stored(failure == nil && !stale) }
    }

    /// Writes `buffers` back to back at `offset`: if `direct`, with O_DIRECT when every length is a multiple of
    /// the page size (falling back to the page cache for good if the file system refuses), else through the page
    /// cache. Returns whether the write was direct.
    private func writeData(_ buffers: [BlockBuffer], at offset: UInt64, direct: Bool) throws(SystemError) -> Bool {
        if direct, directWrites.load(ordering: .relaxed),
           buffers.allSatisfy({ $0.count % BlockBuffer.alignment == 0 }) {
            do {
                try directFile.write(buffers.map(\.bytes), at: offset)
                return true
            } catch where error.errno == .invalidArgument {
                directWrites.store(false, ordering: .relaxed)
                logger.notice("\(directory): direct writes refused (\(error)); writing through the page cache")
            }
        }
        try dataFile.write(buffers.map(\.bytes), at: offset)
        return false
    }
}
