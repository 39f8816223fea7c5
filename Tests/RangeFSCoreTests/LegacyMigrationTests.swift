import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// A cache made by rangefs before format v2 (issue 46, acceptance 5): each v1 folder is migrated when its entry
/// opens, keeping its data and blocks; a crash in the middle of a migration is redone or cleaned up.
final class LegacyMigrationTests: FolderTestCase {
    override class var folderPrefix: String { "migration" }

    func metadata(_ name: String, size: UInt64) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/" + name, size: size, etag: "\"v1\"", lastModified: "")
    }

    /// Writes the v1 folder of `file` by hand with the v1 encoders: `present` blocks of `bytes` in `data`, their
    /// CRCs, a bitmap of them, and a header with a moment. Returns the folder.
    @discardableResult
    func writeV1Entry(_ file: RemoteMetadata, bytes: [UInt8], present: some Sequence<Int>,
                      withData: Bool = true) throws -> String {
        let folder = directory.path + "/entries/" + SHA256.hexDigest(file.url).prefix(32)
        try FileSystemCalls.makeDirectories(folder)
        var header = CacheHeader(blockSize: 65536, size: file.size, generation: 77, url: file.url, etag: file.etag,
                                 lastModified: file.lastModified)
        header.answeredAt = 1_700_000_000
        let geometry = BlockGeometry(blockSize: 65536, size: file.size)
        var crcs = [UInt32](repeating: 0, count: header.blockCount)
        var bits = BlockBitmap(blockCount: header.blockCount)
        if withData {
            let data = try SystemFile(path: folder + "/data", flags: O_RDWR | O_CREAT)
            try data.truncate(to: file.size)
            for index in present {
                let range = geometry.byteRange(of: index..<(index + 1))
                let block = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
                try data.write(block, at: range.lowerBound)
                crcs[index] = CRC32C.checksum(block)
                bits.insert(index)
            }
        }
        var table = ByteWriter()
        for crc in crcs { table.write(crc) }
        try FileSystemCalls.replaceAtomically(folder + "/crc32c", with: table.bytes)
        try FileSystemCalls.replaceAtomically(folder + "/bitmap",
                                              with: BitmapRecord(blockSize: 65536, generation: 77, present: bits).encoded())
        try FileSystemCalls.replaceAtomically(folder + "/header", with: header.encoded())
        return folder
    }

    func testAV1CacheIsMigratedWhenItsEntriesOpen() throws {
        let small = metadata("small.bin", size: 100_000), large = metadata("large.bin", size: 3_000_000)
        let smallBytes = pseudoRandomBytes(count: 100_000, seed: 1)
        let largeBytes = pseudoRandomBytes(count: 3_000_000, seed: 2)
        let smallFolder = try writeV1Entry(small, bytes: smallBytes, present: 0..<2)
        let largeFolder = try writeV1Entry(large, bytes: largeBytes, present: Array(0..<5) + [40])
        let store = try CacheStore(root: directory.path, logger: logger)

        // Read-only consumers see a v1 entry as it is, and migrate nothing.
        XCTAssertEqual(store.storedEntry(for: large.url)?.present.setCount, 6)
        XCTAssertEqual(store.storedMetadata(for: small.url)?.answeredAt, 1_700_000_000)
        XCTAssertEqual(Set(store.entryFolders()), [smallFolder, largeFolder])
        XCTAssertEqual(store.verify(folder: largeFolder, repair: false).presentBlocks, 6)
        XCTAssertEqual(access(largeFolder + "/data", F_OK), 0)

        let smallEntry = try store.entry(for: small, blockSize: 65536)
        XCTAssertTrue(smallEntry.isSmall)
        XCTAssertTrue(smallEntry.presentBlocks.isFull)
        XCTAssertEqual(try smallEntry.readPresent(0..<100_000), smallBytes)
        XCTAssertEqual(smallEntry.answeredAt, 1_700_000_000, "the header's moment is kept")
        XCTAssertNotEqual(access(smallFolder, F_OK), 0, "the v1 folder is gone")
        XCTAssertEqual(access(EntryFiles(root: directory.path, url: small.url).base, F_OK), 0)

        let largeEntry = try store.entry(for: large, blockSize: 65536)
        XCTAssertFalse(largeEntry.isSmall)
        XCTAssertEqual(largeEntry.presentBlocks.setCount, 6)
        XCTAssertTrue(largeEntry.isPresent(40))
        XCTAssertEqual(try largeEntry.readPresent(0..<(5 * 65536)), Array(largeBytes[0..<(5 * 65536)]))
        XCTAssertNotEqual(access(largeFolder, F_OK), 0, "the v1 folder is gone")
        let files = EntryFiles(root: directory.path, url: large.url)
        XCTAssertEqual(access(files.dataPath, F_OK), 0)
        XCTAssertEqual(access(files.metaPath, F_OK), 0)
        // The CRCs came along: a block rotten on disk is caught on its first read after the next open.
        try SystemFile(path: files.dataPath, flags: O_RDWR).write([0xEE], at: 40 * 65536 + 5)
        store.close(large.url, committing: true)
        let report = store.verify(folder: store.entryPath(for: large.url), repair: false)
        XCTAssertEqual(report.badBlocks, [40], report.line)
        XCTAssertEqual(Set(store.entryFolders()), [files.base, EntryFiles(root: directory.path, url: small.url).base])
    }

    /// A kill after a migration wrote the v2 files but before it removed the v1 folder's `data`: the folder still
    /// holds an entry, which wins (it is what the migration was copying), and the migration is done again.
    func testACompleteV1FolderWinsOverV2FilesOfTheSameURL() throws {
        let file = metadata("both.bin", size: 200_000)
        let old = pseudoRandomBytes(count: 200_000, seed: 3), new = pseudoRandomBytes(count: 200_000, seed: 4)
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: file, blockSize: 65536)
            _ = Array(old[0..<65536]).withUnsafeBytes { entry.store(block: 0, bytes: $0) }
            try entry.commit()
        }
        let folder = try writeV1Entry(file, bytes: new, present: 0..<4)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: file, blockSize: 65536)
        XCTAssertTrue(entry.presentBlocks.isFull)
        XCTAssertEqual(try entry.readPresent(0..<200_000), new)
        XCTAssertNotEqual(access(folder, F_OK), 0)
    }

    /// A kill after a migration removed the folder's `data` but not the rest: leftovers, removed at the open;
    /// the v2 entry stands.
    func testAV1FolderWithoutDataIsLeftoversOfAFinishedMigration() throws {
        let file = metadata("done.bin", size: 2_000_000)
        let bytes = pseudoRandomBytes(count: 2_000_000, seed: 6)
        try writeV1Entry(file, bytes: bytes, present: 0..<31)
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            XCTAssertEqual(try store.entry(for: file, blockSize: 65536).presentBlocks.setCount, 31)
        }
        let folder = try writeV1Entry(file, bytes: bytes, present: [], withData: false)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try store.entry(for: file, blockSize: 65536)
        XCTAssertEqual(entry.presentBlocks.setCount, 31)
        XCTAssertEqual(try entry.readPresent(0..<2_000_000), bytes)
        XCTAssertNotEqual(access(folder, F_OK), 0, "leftovers removed")
    }
}
