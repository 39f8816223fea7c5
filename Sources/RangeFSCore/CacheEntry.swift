// One remote file's local copy (format in CacheFormat.swift).
//
// Three sets of blocks live in memory under one mutex:
//   present   the block's bytes are in the data file (written by this process, or durable from an earlier one);
//   inFlight  some transfer has claimed the block, so nobody requests it twice;
//   verified  the block's bytes matched their CRC since this process opened the entry.
// and `durable`, the set the bitmap file on disk holds.
//
// Durability order (DESIGN.md §3): a block is pwritten and its CRC slot pwritten, then it becomes `present` and its
// waiters are answered from the page cache at once. A later group commit takes a snapshot of `present`, fdatasyncs
// the data and CRC files, and only then replaces the bitmap file with the snapshot. So a bit never reaches the disk
// before its data, and a crash loses at most one commit interval of progress.
//
// Blocks loaded from an earlier run are trusted only after their CRC matches, checked the first time each is read:
// a torn write or a flipped sector turns into a refetch, never into wrong bytes.

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
    private let state: Mutex<State>
    /// Serialises commits so that an older snapshot never replaces a newer one. Lock order: commitLock, then state.
    private let commitLock = Mutex(())
    private let logger: Logger

    private struct Waiter {
        var remaining: Int
        let resume: Resume
    }

    private struct State {
        var present: BlockBitmap
        var verified: BlockBitmap
        var inFlight: BlockBitmap
        var durable: BlockBitmap
        var crcs: [UInt32]
        var changedSinceCommit = false
        var bytesSinceCommit = 0
        var nextWaiterID: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        var waitersByBlock: [Int: [UInt64]] = [:]
    }

    public var blockSize: Int { header.blockSize }
    public var blockCount: Int { header.blockCount }
    public var size: UInt64 { header.size }
    /// The data file's descriptor, for replies spliced straight from it.
    public var dataDescriptor: Int32 { dataFile.descriptor }

    init(header: CacheHeader, directory: String, dataFile: SystemFile, crcFile: SystemFile,
         durable: BlockBitmap, crcs: [UInt32], logger: Logger) {
        self.header = header
        self.directory = directory
        self.dataFile = dataFile
        self.crcFile = crcFile
        self.logger = logger
        let empty = BlockBitmap(blockCount: header.blockCount)
        state = Mutex(State(present: durable, verified: empty, inFlight: empty, durable: durable, crcs: crcs))
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

    /// Makes sure `blocks` will be present. Returns `true` if they already are (`whenReady` is then not called).
    /// Otherwise `whenReady` runs once they all arrive or one fails, and `claimed` receives the runs of blocks that
    /// nobody was fetching yet, now marked in flight: the caller must fetch them.
    public func request(blocks: Range<Int>, claimed: inout [Range<Int>], whenReady: @escaping Resume) -> Bool {
        verifyLoadedBlocks(blocks)
        return state.withLock { state in
            var missing: [Int] = []
            for index in blocks where !state.present.contains(index) { missing.append(index) }
            if missing.isEmpty { return true }
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            state.waiters[id] = Waiter(remaining: missing.count, resume: whenReady)
            for index in missing { state.waitersByBlock[index, default: []].append(id) }
            claimed = Self.claim(missing, in: &state)
            return false
        }
    }

    /// Marks the absent, unclaimed blocks of `blocks` in flight and returns them as runs; for readahead and fill.
    public func claim(blocks: Range<Int>) -> [Range<Int>] {
        state.withLock { state in
            Self.claim(blocks.filter { !state.present.contains($0) }, in: &state)
        }
    }

    private static func claim(_ candidates: [Int], in state: inout State) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        for index in candidates where !state.inFlight.contains(index) {
            state.inFlight.insert(index)
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
    /// a mismatch makes the block absent so it is fetched again.
    private func verifyLoadedBlocks(_ blocks: Range<Int>) {
        let unchecked = state.withLock { state in
            blocks.filter { state.present.contains($0) && !state.verified.contains($0) }.map { ($0, state.crcs[$0]) }
        }
        for (index, expected) in unchecked {
            let range = byteRange(of: index..<(index + 1))
            let matches: Bool
            do {
                matches = CRC32C.checksum(try dataFile.read(at: range.lowerBound, count: Int(range.count))) == expected
            } catch {
                logger.warning("cannot read cached block \(index) of \(directory): \(error)")
                matches = false
            }
            state.withLock { state in
                if matches {
                    state.verified.insert(index)
                } else if state.present.remove(index) {
                    state.changedSinceCommit = true
                }
            }
            if !matches { logger.warning("cached block \(index) of \(directory) failed its CRC; fetching it again") }
        }
    }

    // MARK: Storing

    /// Writes one whole block fetched from the origin, then wakes the readers it completes.
    /// A failed write leaves the block absent and fails its waiters; nothing is ever marked present unwritten.
    public func store(block index: Int, bytes: UnsafeRawBufferPointer) throws(SystemError) {
        precondition(bytes.count == length(ofBlock: index), "block \(index) must be stored whole")
        let crc = CRC32C.checksum(bytes)
        do throws(SystemError) {
            try dataFile.write(bytes, at: UInt64(index) * UInt64(blockSize))
            var slot = ByteWriter()
            slot.write(crc)
            try crcFile.write(slot.bytes, at: UInt64(index) * 4)
        } catch {
            abandon(blocks: index..<(index + 1), error: .cacheWrite(error.description))
            throw error
        }
        let ready = state.withLock { state -> [Resume] in
            state.present.insert(index)
            state.verified.insert(index)
            state.inFlight.remove(index)
            state.crcs[index] = crc
            state.changedSinceCommit = true
            state.bytesSinceCommit += bytes.count
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
        for resume in ready { resume(.success(())) }
    }

    /// Releases the claim on the absent blocks of `blocks` and fails every reader waiting for one of them.
    public func abandon(blocks: Range<Int>, error: FetchError) {
        let failed = state.withLock { state -> [Resume] in
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

    /// Bytes stored since the last commit; the store commits early when this grows large.
    public var bytesSinceCommit: Int { state.withLock { $0.bytesSinceCommit } }

    // MARK: Committing

    /// Makes the present set durable: fdatasync data and CRCs, then atomically replace the bitmap file.
    /// Returns whether anything was written.
    @discardableResult
    public func commit() throws(SystemError) -> Bool {
        try commitLock.withLock { _ throws(SystemError) -> Bool in
            let snapshot = state.withLock { state -> BlockBitmap? in
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
