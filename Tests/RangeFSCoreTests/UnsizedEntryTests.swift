import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// An entry whose size is not yet known (issue 46, "one pipeline": a file whose server sends no length becomes an
/// entry of the block pipeline): its header's flag and capacity (CacheFormat.swift, header version 3), its files,
/// and what `verify` says of it. Old caches, whose headers have no flag, read as before.
final class UnsizedEntryTests: FolderTestCase {
    override class var folderPrefix: String { "unsized-entry" }

    let url = "http://origin/stream.bin"
    var unsized: RemoteMetadata { .unsized(url: url, etag: "", lastModified: "Mon, 01 Jan 2024 00:00:00 GMT") }

    func testAHeaderOfUnknownSizeIsVersion3AndSizedHeadersKeepTheirEncoding() throws {
        var header = CacheHeader(blockSize: 1 << 20, size: CacheHeader.unsizedCapacity, generation: 9, url: url,
                                 etag: "", lastModified: "Mon, 01 Jan 2024 00:00:00 GMT")
        let sized = header.encoded()
        XCTAssertEqual(Array(sized[8..<12]), [1, 0, 0, 0], "a sized header without a moment stays version 1")
        header.sizeKnown = false
        let encoded = header.encoded()
        XCTAssertEqual(Array(encoded[8..<12]), [3, 0, 0, 0])
        XCTAssertEqual(try CacheHeader.decode(encoded), header)
        XCTAssertFalse(header.remoteMetadata.sizeKnown, "a capacity is no size")
        XCTAssertEqual(header.remoteMetadata.size, 0)
        header.answeredAt = 1_700_000_000
        XCTAssertEqual(try CacheHeader.decode(header.encoded()), header)
        header.sizeKnown = true
        XCTAssertEqual(Array(header.encoded()[8..<12]), [2, 0, 0, 0], "a sized header with a moment stays version 2")

        // Version 3 with no flag would be a second encoding of a sized header: damage, not a header.
        var unflagged = Array(encoded.dropLast(8)) + [0, 0, 0, 0]
        withUnsafeBytes(of: CRC32C.checksum(unflagged[...]).littleEndian) { unflagged.append(contentsOf: $0) }
        XCTAssertThrowsError(try CacheHeader.decode(unflagged)) { error in
            XCTAssertEqual(error as? FormatError, .inconsistent("header flags 0"))
        }
    }

    func testMetaBlocksOfAnOldCacheStillReadAsSized() throws {
        // The MetaBlock fuzzer's seeds were written by rangefs before the flag existed (a v2 cache as it is on
        // disk); the newest seed is an entry of unknown size.
        let seeds = try XCTUnwrap(try FuzzInputs.kept("seeds", of: "MetaBlock"))
        for name in ["meta-block-new", "meta-block-small"] {
            let seed = try XCTUnwrap(seeds.first { $0.name == name }?.bytes, name)
            let meta = try MetaBlock.decode(Array(seed.dropFirst()))
            XCTAssertTrue(meta.header.sizeKnown, name)
        }
        let seed = try XCTUnwrap(seeds.first { $0.name == "meta-block-size-unknown" }?.bytes)
        let meta = try MetaBlock.decode(Array(seed.dropFirst()))
        XCTAssertFalse(meta.header.sizeKnown)
        XCTAssertEqual(meta.header.size, CacheHeader.unsizedCapacity)
        XCTAssertEqual(meta.slot?.present.setCount, 3)
        XCTAssertNil(metaBlockPropertyBroken(seed))
    }

    func testAnEntryOfUnknownSizeIsALargeEntryOfItsCapacityAndReopens() throws {
        let bytes = pseudoRandomBytes(count: 3 * 65536)
        let generation: UInt64
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: unsized, blockSize: 65536)
            XCTAssertFalse(entry.header.sizeKnown)
            XCTAssertEqual(entry.header.size, CacheHeader.unsizedCapacity)
            XCTAssertEqual(entry.header.blockCount, 256)
            let files = store.entryFiles(for: url)
            XCTAssertEqual(access(files.metaPath, F_OK), 0, "a large entry: its own .meta beside its .data")
            var status = stat()
            XCTAssertEqual(stat(files.dataPath, &status), 0)
            XCTAssertEqual(UInt64(status.st_size), CacheHeader.unsizedCapacity)
            for index in 0..<3 {
                _ = Array(bytes[(index * 65536)..<((index + 1) * 65536)]).withUnsafeBytes {
                    entry.store(block: index, bytes: $0)
                }
            }
            _ = try entry.commit()
            generation = entry.header.generation
            XCTAssertFalse(entry.matches(RemoteMetadata(url: url, size: 3 * 65536, etag: "",
                                                        lastModified: unsized.lastModified)),
                           "an entry of a capacity is not the entry of a size")
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let reopened = try store.entry(for: unsized, blockSize: 65536)
        XCTAssertEqual(reopened.header.generation, generation, "the same entry, kept")
        XCTAssertFalse(reopened.header.sizeKnown)
        XCTAssertEqual(reopened.presentBlocks.clearRuns(in: 0..<256), [3..<256])
        XCTAssertEqual(reopened.reply(for: 65536..<131_072)?.bytesForTesting(), Array(bytes[65536..<131_072]))
    }

    func testAFileWhoseSizeBecameKnownGetsANewEntry() throws {
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: unsized, blockSize: 65536)
            _ = pseudoRandomBytes(count: 65536).withUnsafeBytes { entry.store(block: 0, bytes: $0) }
            _ = try entry.commit()
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let sized = RemoteMetadata(url: url, size: 100_000, etag: "", lastModified: unsized.lastModified)
        let entry = try store.entry(for: sized, blockSize: 65536)
        XCTAssertTrue(entry.header.sizeKnown)
        XCTAssertEqual(entry.header.size, 100_000)
        XCTAssertEqual(entry.presentBlocks.setCount, 0, "the capacity's blocks are not the size's")
    }

    func testVerifySaysTheSizeIsNotYetKnown() throws {
        let folder: String
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: unsized, blockSize: 65536)
            for index in 0..<2 {
                _ = pseudoRandomBytes(count: 65536).withUnsafeBytes { entry.store(block: index, bytes: $0) }
            }
            _ = try entry.commit()
            folder = store.entryPath(for: url)
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let report = store.verify(folder: folder, repair: false)
        XCTAssertTrue(report.isHealthy)
        XCTAssertEqual(report.presentBlocks, 2)
        XCTAssertEqual(report.line, "STREAM  \(url): 2 blocks verified of a file whose size is not yet known (its "
                       + "server sends no length; the entry holds up to 16777216 bytes until the stream ends)")
        try SystemFile(path: store.entryFiles(for: url).dataPath, flags: O_RDWR).write([0x55], at: 65536 + 9)
        let bad = store.verify(folder: folder, repair: false)
        XCTAssertEqual(bad.badBlocks, [1])
        XCTAssertTrue(bad.line.hasPrefix("BAD     "), bad.line)
    }

    // MARK: Settling the size

    /// An entry of unknown size holding `blocks` full blocks of `bytes` (64 KiB blocks), committed.
    private func streamedEntry(_ store: CacheStore, blocks: Int, of bytes: [UInt8]) throws -> CacheEntry {
        let entry = try store.entry(for: unsized, blockSize: 65536)
        for index in 0..<blocks {
            _ = Array(bytes[(index * 65536)..<((index + 1) * 65536)]).withUnsafeBytes {
                entry.store(block: index, bytes: $0)
            }
        }
        _ = try entry.commit()
        return entry
    }

    /// Streams `blocks` whole blocks and `extra` bytes into an entry of unknown size and settles it at that size:
    /// the old entry is stale, the new one complete at the size, and it stays so across a remount, byte for byte.
    /// Returns the settled entry (before the remount) and the store of the remount.
    private func settle(blocks: Int, extra: Int) throws -> (settled: CacheEntry, remounted: CacheStore) {
        let size = blocks * 65536 + extra
        let bytes = pseudoRandomBytes(count: size)
        let settled: CacheEntry
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try streamedEntry(store, blocks: blocks, of: bytes)
            settled = try store.settleSize(of: entry, size: UInt64(size), lastBlock: Array(bytes[(blocks * 65536)...]))
            XCTAssertTrue(entry.isStale, "the entry of the capacity serves nothing more")
            XCTAssertTrue(settled.header.sizeKnown)
            XCTAssertEqual(settled.header.size, UInt64(size))
            XCTAssertTrue(settled.isComplete)
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let sized = RemoteMetadata(url: url, size: UInt64(size), etag: "", lastModified: unsized.lastModified)
        let reopened = try store.entry(for: sized, blockSize: 65536)
        XCTAssertTrue(reopened.isComplete, "every block kept across a remount")
        XCTAssertEqual(reopened.reply(for: 0..<UInt64(size))?.bytesForTesting(), bytes)
        return (settled, store)
    }

    func testAnEndedStreamUnderAMebibyteSettlesAsOneSmallFile() throws {
        let (settled, store) = try settle(blocks: 3, extra: 1000)
        XCTAssertTrue(settled.isSmall)
        let files = store.entryFiles(for: url)
        XCTAssertNotEqual(access(files.dataPath, F_OK), 0, "the capacity's .data is gone")
        XCTAssertNotEqual(access(files.metaPath, F_OK), 0, "the capacity's .meta is gone")
        XCTAssertEqual(store.verify(folder: store.entryPath(for: url), repair: false).line,
                       "OK      \(url): 4 blocks verified")
    }

    func testAnEndedStreamOverAMebibyteSettlesAsALargeEntryOfItsSize() throws {
        let (settled, store) = try settle(blocks: 20, extra: 7)
        XCTAssertFalse(settled.isSmall)
        var status = stat()
        XCTAssertEqual(stat(store.entryFiles(for: url).dataPath, &status), 0)
        XCTAssertEqual(Int(status.st_size), 20 * 65536 + 7, "the .data is cut to the size")
        XCTAssertEqual(store.verify(folder: store.entryPath(for: url), repair: false).line,
                       "OK      \(url): 21 blocks verified")
    }

    func testASettledEntryKeepsTheBlocksItHasAndAWrongSizeIsRefused() throws {
        // Under a cap, a stream's first blocks may be evicted behind it: they stay absent, to be streamed again.
        let bytes = pseudoRandomBytes(count: 4 * 65536)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try streamedEntry(store, blocks: 2, of: bytes)
        XCTAssertThrowsError(try store.settleSize(of: entry, size: CacheHeader.unsizedCapacity + 1, lastBlock: [1])) {
            XCTAssertEqual("\($0)", "\(url): cannot keep it at its size of 16777217 bytes: its entry is not one of "
                           + "unknown size that holds it; it is streamed again from byte 0")
        }
        XCTAssertFalse(entry.isStale, "a refused size leaves the entry as it was")
        let settled = try store.settleSize(of: entry, size: 3 * 65536 + 5, lastBlock: [1, 2, 3, 4, 5])
        XCTAssertEqual(settled.presentBlocks.clearRuns(in: 0..<4), [2..<3], "block 2 was never cached")
        XCTAssertEqual(settled.reply(for: (3 * 65536)..<(3 * 65536 + 5))?.bytesForTesting(), [1, 2, 3, 4, 5])
    }

    func testABodyThatOutgrewItsEntryGetsSixteenTimesTheRoomAndKeepsItsBlocks() throws {
        let bytes = pseudoRandomBytes(count: 2 * 65536)
        let store = try CacheStore(root: directory.path, logger: logger)
        let entry = try streamedEntry(store, blocks: 2, of: bytes)
        let grown = try store.growCapacity(of: entry)
        XCTAssertTrue(entry.isStale)
        XCTAssertFalse(grown.header.sizeKnown)
        XCTAssertEqual(grown.header.size, 16 * CacheHeader.unsizedCapacity)
        XCTAssertTrue(grown.isRangeless, "a file without a length is streamed whole")
        XCTAssertEqual(grown.presentBlocks.setCount, 2)
        XCTAssertEqual(grown.reply(for: 0..<(2 * 65536))?.bytesForTesting(), bytes)
    }
}
