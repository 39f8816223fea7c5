import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Cache format v2 (issue 46): the meta block and its slots, crash safety of a commit, the inodes an entry costs.
final class CacheFormatV2Tests: FolderTestCase {
    override class var folderPrefix: String { "format-v2" }

    func metadata(_ name: String, size: UInt64) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/" + name, size: size, etag: "\"v1\"", lastModified: "")
    }

    func store(_ entry: CacheEntry, blocks: some Sequence<Int>, of bytes: [UInt8]) {
        for index in blocks {
            let range = entry.byteRange(of: index..<(index + 1))
            _ = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]).withUnsafeBytes {
                entry.store(block: index, bytes: $0)
            }
        }
    }

    func testMetaBlockRoundTrip() throws {
        var header = CacheHeader(blockSize: 65536, size: 1_000_000, generation: 42, url: "http://h/f", etag: "\"e\"",
                                 lastModified: "Mon, 01 Jan 2024 00:00:00 GMT")
        var (bytes, layout) = MetaBlock.initial(for: header)
        XCTAssertEqual(bytes.count, layout.length)
        XCTAssertNil(try MetaBlock.decode(bytes).slot, "a new meta block has no valid slot")
        let crcs: [UInt32] = (0..<UInt32(header.blockCount)).map { $0 &* 2_654_435_761 }
        var table = ByteWriter()
        for crc in crcs { table.write(crc) }
        bytes.replaceSubrange(layout.crcTableOffset..<(layout.crcTableOffset + crcs.count * 4), with: table.bytes)
        var present = BlockBitmap(blockCount: header.blockCount)
        for index in [0, 3, 15] { present.insert(index) }
        let slot = MetaSlot(sequence: 7, generation: 42, answeredAt: 1_700_000_000, etagRetired: true, present: present)
        XCTAssertEqual(try MetaSlot.decode(slot.encoded(), blockCount: header.blockCount), slot)
        bytes.replaceSubrange(layout.slotOffset(1)..<layout.slotOffset(2), with: slot.encoded())
        let decoded = try MetaBlock.decode(bytes)
        XCTAssertEqual(decoded.slot, slot)
        XCTAssertEqual(decoded.crcs, crcs)
        header.answeredAt = 1_700_000_000
        header.etag = ""
        XCTAssertEqual(decoded.header, header, "the slot's moment and retired ETag apply to the header")
        XCTAssertEqual(try EntryFooter.decode(EntryFooter(metaOffset: 1_000_000).encoded()).metaOffset, 1_000_000)
        XCTAssertThrowsError(try MetaSlot.decode(Array(slot.encoded().dropLast()), blockCount: header.blockCount))
    }

    /// A torn write of the newer slot (a power cut in the middle of a commit's slot write) leaves the older one.
    func testATornNewerSlotLeavesTheOlderOne() throws {
        let bytes = pseudoRandomBytes(count: 300_000)
        let file = metadata("torn.bin", size: 300_000)
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: file, blockSize: 65536)
            self.store(entry, blocks: [0, 1], of: bytes)
            try entry.commit()
            self.store(entry, blocks: [2, 3], of: bytes)
            // The second commit's slot reaches the disk only in part: its first half, over the slot it replaces.
            entry.commitLock.lock()
            let plan = try XCTUnwrap(entry.planCommit())
            try entry.metaFile.write(Array(plan.record.prefix(plan.record.count / 2)), at: plan.slotOffset)
            entry.commitLock.unlock()
            // The "kill": the store goes without another commit.
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: file, blockSize: 65536)
        XCTAssertEqual(entry.presentBlocks.clearRuns(in: 0..<5), [2..<5], "the first commit's bits, no more")
        XCTAssertEqual(try entry.readPresent(0..<65536), Array(bytes[0..<65536]))
        // And the next commit goes on from there: a third sequence, in the torn slot.
        self.store(entry, blocks: [4], of: bytes)
        XCTAssertTrue(try entry.commit())
        guard case .entry(let loaded) = EntryFiles(root: directory.path, url: file.url).load() else {
            return XCTFail("the entry is readable")
        }
        XCTAssertEqual(loaded.meta.slot?.sequence, 2)
        XCTAssertEqual(loaded.meta.slot?.present.clearRuns(in: 0..<5), [2..<4])
    }

    /// Data and CRCs written but no slot (a kill between a block's write and the commit): the old bits stand.
    func testAKillBeforeTheSlotWriteLeavesTheOldBits() throws {
        let bytes = pseudoRandomBytes(count: 3_000_000, seed: 5)
        let file = metadata("large.bin", size: 3_000_000)
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: file, blockSize: 65536)
            XCTAssertFalse(entry.isSmall)
            XCTAssertEqual(entry.passthroughPath, EntryFiles(root: directory.path, url: file.url).dataPath)
            self.store(entry, blocks: 0..<3, of: bytes)
            try entry.commit()
            self.store(entry, blocks: 10..<20, of: bytes)
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: file, blockSize: 65536)
        XCTAssertEqual(entry.presentBlocks.setCount, 3)
        XCTAssertEqual(try entry.readPresent(0..<(3 * 65536)), Array(bytes[0..<(3 * 65536)]))
    }

    /// A kill between a new entry's create and its one write leaves an empty file: a small entry's file or a large
    /// one's `.meta` (CI saw it in CrashSafetyTests, reported as a damaged entry). Nothing was committed of it:
    /// `verify` says so and passes, and the next open starts the entry empty and makes it whole.
    func testAnEntryKilledBetweenItsCreateAndItsFirstWriteIsNeverCommittedNotDamaged() throws {
        let small = metadata("small.bin", size: 5_000), large = metadata("large.bin", size: 3_000_000)
        let smallFiles = EntryFiles(root: directory.path, url: small.url)
        let largeFiles = EntryFiles(root: directory.path, url: large.url)
        for shard in [smallFiles.shard, largeFiles.shard] {
            try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        }
        XCTAssertTrue(FileManager.default.createFile(atPath: smallFiles.base, contents: nil))
        XCTAssertTrue(FileManager.default.createFile(atPath: largeFiles.metaPath, contents: nil))
        let store = try CacheStore(root: directory.path, logger: logger)
        for files in [smallFiles, largeFiles] {
            let report = store.verify(folder: files.base, repair: false)
            XCTAssertTrue(report.neverCommitted, "\(report.line)")
            XCTAssertTrue(report.isHealthy, "\(report.line)")
        }
        for (file, size) in [(small, 5_000), (large, 3_000_000)] {
            let bytes = pseudoRandomBytes(count: size, seed: 9)
            let entry = try store.entry(for: file, blockSize: 65536)
            XCTAssertEqual(entry.presentBlocks.setCount, 0)
            self.store(entry, blocks: 0..<entry.blockCount, of: bytes)
            XCTAssertTrue(try entry.commit())
            let report = store.verify(folder: store.entryPath(for: file.url), repair: false)
            XCTAssertTrue(report.isHealthy && !report.neverCommitted, "\(report.line)")
            XCTAssertEqual(report.presentBlocks, entry.blockCount)
        }
    }

    /// Acceptance 3 of issue 46: a cached small file costs one inode (plus its share of at most 256 shards).
    func testSmallEntriesCostOneInodeEach() throws {
        let count = 300
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            for index in 0..<count {
                let size = UInt64(1_000 + index * 37)
                let entry = try store.entry(for: metadata("small/\(index).bin", size: size), blockSize: 65536)
                XCTAssertTrue(entry.isSmall)
                XCTAssertNil(entry.passthroughPath, "a small entry is never passed through")
                self.store(entry, blocks: 0..<entry.blockCount, of: pseudoRandomBytes(count: Int(size), seed: UInt64(index)))
            }
            store.commitAll()
        }
        var files = 0, folders = 0, bytes = 0
        let walker = try XCTUnwrap(FileManager.default.enumerator(atPath: directory.path + "/entries"))
        while let path = walker.nextObject() as? String {
            var info = stat()
            XCTAssertEqual(lstat(directory.path + "/entries/" + path, &info), 0)
            if info.st_mode & S_IFMT == S_IFDIR { folders += 1 } else { files += 1 }
            bytes += Int(info.st_blocks) * 512
        }
        XCTAssertEqual(files, count, "one file per entry")
        XCTAssertLessThanOrEqual(folders, 256, "shard folders only")
        let data = (0..<count).reduce(0) { $0 + 1_000 + $1 * 37 }
        XCTAssertLessThanOrEqual(bytes, data + count * 4096 + folders * 4096, "disk use: the data + 4 KiB per file")
        let reopened = try CacheStore(root: directory.path, logger: logger)
        let entry = try reopened.entry(for: metadata("small/299.bin", size: 1_000 + 299 * 37), blockSize: 65536)
        XCTAssertTrue(entry.presentBlocks.isFull)
        XCTAssertEqual(try entry.readPresent(0..<entry.size), pseudoRandomBytes(count: 1_000 + 299 * 37, seed: 299))
    }
}
