import Foundation
import Logging
@testable import RangeFSCore
import RangeFSTestSupport
import XCTest

/// `--cache-max-size`: least recently used blocks go first, pinned files never, and the cap holds.
final class EvictionTests: XCTestCase {
    let logger = Logger(label: "test")
    let bytes = pseudoRandomBytes(count: 10 * 65536)
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "eviction")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func makeStore(maxBlocks: Int) throws -> CacheStore {
        var settings = StoreSettings()
        settings.maxBytes = maxBlocks * 65536
        return try CacheStore(root: directory.path, settings: settings, logger: logger)
    }

    func entry(_ store: CacheStore, _ name: String) throws -> CacheEntry {
        let metadata = RemoteMetadata(url: "http://origin/\(name)", size: UInt64(bytes.count), etag: "\"1\"",
                                      lastModified: "")
        return try store.entry(for: metadata, blockSize: 65536)
    }

    /// Stores block `index` as a fetch does, and waits until it is written (and counted as used).
    func fetch(_ index: Int, into entry: CacheEntry, _ store: CacheStore) {
        let range = entry.byteRange(of: index..<(index + 1))
        let buffer = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { BlockBuffer(copying: $0) }
        entry.put(block: index, buffer: buffer, background: false, budgeted: true)
        store.waitForWrites()
    }

    func present(_ entry: CacheEntry) -> [Int] {
        (0..<entry.blockCount).filter(entry.isPresent)
    }

    func testTheLeastRecentlyUsedBlockGoesFirst() throws {
        let store = try makeStore(maxBlocks: 3)
        let file = try entry(store, "a.bin")
        for index in 0..<3 { fetch(index, into: file, store) }
        store.ledger.recordUse(file, blocks: 0..<1)  // read again: block 1 is now the least recently used
        fetch(3, into: file, store)
        XCTAssertEqual(present(file), [0, 2, 3])
        fetch(4, into: file, store)
        XCTAssertEqual(present(file), [0, 3, 4])
        XCTAssertEqual(store.ledger.usedBytes, 3 * 65536, "the cap holds")
    }

    func testBlocksOfOtherFilesCountAndPinnedFilesStay() throws {
        let store = try makeStore(maxBlocks: 3)
        let pinned = try entry(store, "pinned.bin"), other = try entry(store, "other.bin")
        pinned.setPinned(true)
        fetch(0, into: pinned, store)
        fetch(1, into: pinned, store)
        fetch(0, into: other, store)
        fetch(1, into: other, store)  // over the cap: the pinned blocks are older, but stay
        XCTAssertEqual(present(pinned), [0, 1])
        XCTAssertEqual(present(other), [1], "the other file's own older block went instead")
    }

    func testABlockBeingServedIsNotEvicted() throws {
        let store = try makeStore(maxBlocks: 2)
        let file = try entry(store, "a.bin")
        fetch(0, into: file, store)
        fetch(1, into: file, store)
        let reply = try XCTUnwrap(file.reply(for: file.byteRange(of: 0..<1)))
        // While a reply copies block 0 the block stays, although it is the least recently used.
        let range = file.byteRange(of: 0..<1)
        let blocks = file.blocks(covering: range)
        withExtendedLifetime(reply) {
            XCTAssertTrue(serving(file, blocks) {
                fetch(2, into: file, store)
                return present(file) == [0, 2]
            })
        }
    }

    private func serving(_ entry: CacheEntry, _ blocks: Range<Int>, _ body: () -> Bool) -> Bool {
        entry.beginServing(blocks)
        defer { entry.endServing(blocks) }
        return body()
    }
}
