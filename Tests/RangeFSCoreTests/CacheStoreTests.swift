import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

final class CacheStoreTests: XCTestCase {
    let logger = Logger(label: "test")
    let metadata = RemoteMetadata(url: "http://origin/file.bin", size: 300_000, etag: "\"v1\"", lastModified: "")
    var directory: TemporaryDirectory!

    override func tearDown() {
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "store")
    }

    func block(_ entry: CacheEntry, _ index: Int, in bytes: [UInt8]) -> [UInt8] {
        let range = entry.byteRange(of: index..<(index + 1))
        return Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
    }

    func storeBlock(_ entry: CacheEntry, _ index: Int, from bytes: [UInt8]) throws {
        _ = block(entry, index, in: bytes).withUnsafeBytes { entry.store(block: index, bytes: $0) }
    }

    /// Fills `blocks` of a fresh entry, commits, closes the store, and returns the entry's file (a small entry:
    /// data, then meta block).
    func committedEntry(blocks: [Int]) throws -> String {
        let bytes = pseudoRandomBytes(count: 300_000)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: metadata, blockSize: 65536)
        for index in blocks { try storeBlock(entry, index, from: bytes) }
        try entry.commit()
        return entry.dataPath
    }

    func testStoredBlocksSurviveReopenOnlyAfterCommit() throws {
        let bytes = pseudoRandomBytes(count: 300_000)
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: metadata, blockSize: 65536)
            XCTAssertEqual(entry.blockCount, 5)
            try storeBlock(entry, 1, from: bytes)
            try storeBlock(entry, 4, from: bytes)  // the short last block
            XCTAssertEqual(entry.cachedBytes, 65536 + (300_000 - 4 * 65536))
            XCTAssertEqual(entry.durableBlocks.setCount, 0, "nothing is durable before a commit")
            XCTAssertTrue(try entry.commit())
            try storeBlock(entry, 2, from: bytes)  // stored but never committed: lost by the "crash" below
        }
        let reopened = try CacheStore(root: directory.path, logger: logger)
        let entry = try reopened.entry(for: metadata, blockSize: 65536)
        XCTAssertEqual(entry.presentBlocks.clearRuns(in: 0..<5), [0..<1, 2..<4])
        XCTAssertEqual(try entry.readPresent(entry.byteRange(of: 1..<2)), block(entry, 1, in: bytes))
        XCTAssertEqual(try entry.readPresent(entry.byteRange(of: 4..<5)), block(entry, 4, in: bytes))
    }

    func testAnAcceptedBlockIsServedAtOnceAndPresentOnlyOnceWritten() throws {
        let bytes = pseudoRandomBytes(count: 300_000)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: metadata, blockSize: 65536)
        let landed = LockedBox<[Int: Bool]>([:])
        // Blocks 1 and 2 as a reader's (through the page cache), 3 as background fill (O_DIRECT on this disk).
        for index in 1...3 {
            let buffer = block(entry, index, in: bytes).withUnsafeBytes { BlockBuffer(copying: $0) }
            let accepted = entry.accept(block: index, buffer: buffer, writeBackNow: index == 3) { stored in
                // The writer calls this after the block became present: its bytes must be in the data file.
                let onDisk = try? entry.readPresent(entry.byteRange(of: index..<(index + 1)))
                landed.withLock { $0[index] = stored && entry.isPresent(index) && onDisk == self.block(entry, index, in: bytes) }
            }
            XCTAssertTrue(accepted)
        }
        // Readable at once, whether or not the writer got to them yet.
        let range = entry.byteRange(of: 1..<4)
        let reply = try XCTUnwrap(entry.reply(for: range))
        XCTAssertEqual(reply.bytesForTesting(), Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]))
        entry.waitForWrites()
        XCTAssertEqual(landed.withLock { $0 }, [1: true, 2: true, 3: true])
        XCTAssertFalse(block(entry, 1, in: bytes).withUnsafeBytes {
            entry.accept(block: 1, buffer: BlockBuffer(copying: $0))
        }, "a block already present brings nothing new")
        XCTAssertTrue(try entry.commit())
        XCTAssertEqual(entry.durableBlocks.clearRuns(in: 0..<5), [0..<1, 4..<5])
    }

    /// A reply straight from the data file's mapping leaves the copying to the kernel, which faults uncached pages
    /// in one at a time: a 4 KiB synchronous disk read per page. Blocks that background fill wrote with O_DIRECT
    /// are not in the page cache, so a reply asks for them at once first.
    func testAReplyAsksForBlocksFillWroteDirectlyAtOnce() throws {
        let bytes = pseudoRandomBytes(count: 300_000)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: metadata, blockSize: 65536)
        for index in 0..<4 {
            let buffer = block(entry, index, in: bytes).withUnsafeBytes { BlockBuffer(copying: $0) }
            XCTAssertTrue(entry.accept(block: index, buffer: buffer, writeBackNow: true))
        }
        entry.waitForWrites()
        let range = entry.byteRange(of: 0..<4)
        let data = try SystemFile(path: entry.dataPath, flags: O_RDONLY)
        let length = Int(range.upperBound)
        let view = try XCTUnwrap(mmap(nil, length, PROT_READ, MAP_SHARED, data.descriptor, 0))
        defer { munmap(view, length) }
        var resident = [UInt8](repeating: 0, count: (length + 4095) / 4096)
        func residentPages() -> Int {
            guard mincore(view, length, &resident) == 0 else { return -1 }
            return resident.filter { $0 & 1 != 0 }.count
        }
        guard residentPages() == 0 else {
            throw XCTSkip("this filesystem (\(directory.path)) refuses O_DIRECT, so fill's blocks stay in the page cache")
        }
        let reply = try XCTUnwrap(entry.reply(for: range))
        let deadline = Date().addingTimeInterval(5)
        while residentPages() < resident.count && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(residentPages(), resident.count, "the reply's pages are being read before the kernel copies them")
        XCTAssertEqual(reply.bytesForTesting(), Array(bytes[0..<length]))
    }

    func testEveryPieceOfAVectorWriteLandsInOrder() throws {
        let file = try SystemFile(path: directory.path + "/pieces", flags: O_RDWR | O_CREAT)
        let pieces = [pseudoRandomBytes(count: 5000, seed: 1), [], pseudoRandomBytes(count: 70_000, seed: 2),
                      pseudoRandomBytes(count: 1, seed: 3)]
        let buffers = pieces.map { piece in piece.withUnsafeBytes { BlockBuffer(copying: $0) } }
        try file.write(buffers.map(\.bytes), at: 100)
        XCTAssertEqual(try file.read(at: 100, count: 75_001), pieces.flatMap { $0 })
        XCTAssertEqual(try file.read(at: 0, count: 100), [UInt8](repeating: 0, count: 100))
    }

    func testAChangedRemoteStartsTheEntryEmpty() throws {
        _ = try committedEntry(blocks: [0])
        var changed = metadata
        changed.etag = "\"v2\""
        let store = try CacheStore(root: directory.path, logger: logger)
        XCTAssertEqual(try store.entry(for: changed, blockSize: 65536).cachedBytes, 0)
        XCTAssertEqual(try store.entry(for: metadata, blockSize: 65536).cachedBytes, 0, "the old version is gone")
    }

    func testDamagedHeaderOrBothSlotsMakeTheEntryEmpty() throws {
        let bytes = pseudoRandomBytes(count: 300_000)
        for what in ["header", "both slots"] {
            let path: String
            do {
                let store = try CacheStore(root: directory.path, logger: logger)
                let entry = try store.entry(for: metadata, blockSize: 65536)
                // Two commits: both slots hold a sequence.
                try storeBlock(entry, 0, from: bytes)
                try entry.commit()
                try storeBlock(entry, 1, from: bytes)
                try entry.commit()
                path = entry.dataPath
            }
            let files = EntryFiles(root: directory.path, url: metadata.url)
            guard case .entry(let loaded) = files.load() else { return XCTFail("the entry is readable") }
            XCTAssertEqual(loaded.meta.slot?.sequence, 2)
            let start = Int(loaded.metaOffset), layout = loaded.meta.layout
            // The header record's middle; or the first byte of bits of each slot.
            let offsets = what == "header" ? [start + MetaLayout.prefixLength + layout.headerLength / 2]
                : (0..<2).map { start + layout.slotOffset($0) + 40 }
            let file = try SystemFile(path: path, flags: O_RDWR)
            for offset in offsets { try file.write([try file.read(at: UInt64(offset), count: 1)[0] ^ 0xFF], at: UInt64(offset)) }
            let store = try CacheStore(root: directory.path, logger: logger)
            XCTAssertEqual(try store.entry(for: metadata, blockSize: 65536).cachedBytes, 0, "damaged \(what)")
        }
    }

    func testABlockThatFailsItsCRCIsAbsentWhenFirstRead() throws {
        let folder = try committedEntry(blocks: [0, 1])
        let data = try SystemFile(path: folder, flags: O_RDWR)
        try data.write([0xAB, 0xCD], at: 70_000)  // inside block 1: a torn or rotten sector
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: metadata, blockSize: 65536)
        var claimed: [Range<Int>] = []
        guard case .ready = entry.request(blocks: 0..<1, claimed: &claimed, whenReady: { _ in }) else {
            return XCTFail("block 0 is intact and must be ready")
        }
        guard case .waiting = entry.request(blocks: 1..<2, claimed: &claimed, whenReady: { _ in }) else {
            return XCTFail("the damaged block must be waited for")
        }
        XCTAssertEqual(claimed, [1..<2], "the damaged block must be fetched again")
    }

    func testVerifyFindsRottenBlocksAndRepairDropsOnlyThem() throws {
        let folder = try committedEntry(blocks: [0, 1, 2, 4])
        try SystemFile(path: folder, flags: O_RDWR).write([0x55], at: 2 * 65536 + 9)
        let store = try CacheStore(root: directory.path, logger: logger)
        XCTAssertEqual(store.entryFolders(), [folder])
        let report = store.verify(folder: folder, repair: false)
        XCTAssertEqual(report.presentBlocks, 4)
        XCTAssertEqual(report.badBlocks, [2])
        XCTAssertEqual(report.url, metadata.url)
        XCTAssertFalse(report.repaired)
        XCTAssertEqual(store.verify(folder: folder, repair: true).badBlocks, [2])
        let after = store.verify(folder: folder, repair: false)
        XCTAssertTrue(after.isHealthy)
        XCTAssertEqual(after.presentBlocks, 3)
        XCTAssertEqual(try store.entry(for: metadata, blockSize: 65536).presentBlocks.clearRuns(in: 0..<5), [2..<4])
    }

    func testASecondProcessCannotOpenTheSameCache() throws {
        let first = try CacheStore(root: directory.path, logger: logger)
        // flock is per open file description, so a second open in this process conflicts like another process.
        XCTAssertThrowsError(try CacheStore(root: directory.path, logger: logger)) { error in
            guard case CacheError.locked(let path, let holder) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, directory.path)
            XCTAssertTrue(holder.contains("pid \(getpid())"), holder)
            XCTAssertTrue("\(error)".contains("--cache"), "the message names the fix")
        }
        withExtendedLifetime(first) {}
    }

    func testCacheDirectoryIsPrivateAndTagged() throws {
        _ = try CacheStore(root: directory.path + "/c", logger: logger)
        var info = stat()
        XCTAssertEqual(stat(directory.path + "/c", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        let tag = try XCTUnwrap(FileSystemCalls.readSmallFile(directory.path + "/c/CACHEDIR.TAG"))
        XCTAssertTrue(String(decoding: tag, as: UTF8.self).hasPrefix("Signature: 8a477f597d28d172789f06886806bc55"))
    }

    /// Opens of a file that has no entry yet, at the same moment, get one entry (a second would rename its header
    /// over the first's and write the same files through another block table).
    func testConcurrentOpensOfOneFileShareOneEntry() throws {
        let store = try CacheStore(root: directory.path, logger: logger)
        let found = LockedBox<[ObjectIdentifier]>([])
        let failures = LockedBox<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do {
                let entry = try store.entry(for: metadata, blockSize: 65536)
                found.withLock { $0.append(ObjectIdentifier(entry)) }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertEqual(Set(found.withLock { $0 }).count, 1)
    }

    /// credentials.json saved from several threads at once (concurrent `rangefs add`s) is always one whole
    /// snapshot: never a shorter one written over a longer one (trailing garbage the next mount refuses), and no
    /// save fails because another took its temporary file. Snapshots differ in length on purpose.
    func testCredentialsSavedFromManyThreadsAtOnceAreAlwaysOneWholeSnapshot() throws {
        let store = try CacheStore(root: directory.path, logger: logger)
        let threads = 8, saves = 50
        let snapshots = (0..<threads).map { thread in
            (0..<saves).map { save -> [String: OriginCredentials] in
                let length = (thread * saves + save) * 7 % 300 + 1
                let query = "token=" + String(repeating: Character(String(thread)), count: length)
                return ["http://origin:80": OriginCredentials(queries: ["http://origin/f\(thread).bin?token=***": query])]
            }
        }
        let every = snapshots.flatMap { $0 }
        let failures = LockedBox<[String]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for save in 0..<saves {
                do {
                    try SavedCredentials(cacheRoot: store.root).save(snapshots[thread][save])
                    let read = try SavedCredentials(cacheRoot: store.root).load()
                    if !every.contains(read) { failures.withLock { $0.append("read back \(read)") } }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }.prefix(5), [])
        XCTAssertTrue(every.contains(try SavedCredentials(cacheRoot: store.root).load()))
        var info = stat()
        XCTAssertEqual(stat(directory.path + "/credentials.json", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp") }
        XCTAssertEqual(left, [], "no temporary file is left behind")
    }
}
