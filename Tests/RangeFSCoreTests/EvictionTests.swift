import Foundation
import Logging
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// `--cache-max-size`: least recently used blocks go first, pinned files never, and the cap holds; background fill
/// never starts for a file that cannot fit and never evicts what was used during its pass (issue 45).
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

    /// Stores block `index` as a fetch does (a fill's with `background`), and waits until it is written (and
    /// counted as used).
    func fetch(_ index: Int, into entry: CacheEntry, _ store: CacheStore, background: Bool = false) {
        let range = entry.byteRange(of: index..<(index + 1))
        let buffer = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { BlockBuffer(copying: $0) }
        entry.put(block: index, buffer: buffer, background: background, budgeted: true)
        store.waitForWrites()
    }

    /// Claims the next fill segment of `entry` (4 blocks) as the scheduler does and, if it got one, brings it.
    @discardableResult
    func fill(_ entry: CacheEntry, _ store: CacheStore, newPass: Bool = false) -> FillClaim {
        let claim = entry.claimFillRun(from: 0, limit: 4, newPass: newPass)
        if case .run(let run, _) = claim {
            for index in run { fetch(index, into: entry, store, background: true) }
        }
        return claim
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

    // Issue 45: a 10-block file through a 3-block cap is read through; its fill claims nothing, for ever.
    func testAFillDoesNotStartForAFileLargerThanTheCap() throws {
        let store = try makeStore(maxBlocks: 3)
        let file = try entry(store, "larger.bin")
        XCTAssertEqual(file.claimFillRun(from: 0, limit: 4, newPass: true), .noRoom)
        XCTAssertEqual(file.fillRefusal, .largerThanCache(cap: 3 * 65536, pinned: 0))
        XCTAssertEqual(present(file), [], "nothing was claimed")
        XCTAssertEqual(file.claimFillRun(from: 0, limit: 4, newPass: false), .noRoom)
    }

    // A file that fits the cap, but not the cap less what another file pinned: not filled either.
    func testAFillDoesNotStartForAFileLargerThanTheCapLessThePinnedFiles() throws {
        let store = try makeStore(maxBlocks: 12)
        let pinned = try entry(store, "pinned.bin"), other = try entry(store, "other.bin")
        XCTAssertNil(other.fillRefusal, "alone, 10 blocks fit under 12")
        pinned.setPinned(true)
        XCTAssertEqual(other.claimFillRun(from: 0, limit: 4, newPass: true), .noRoom)
        XCTAssertEqual(other.fillRefusal, .largerThanCache(cap: 12 * 65536, pinned: 10 * 65536))
        XCTAssertNil(pinned.fillRefusal, "the pinned file's own size is not counted against it")
    }

    // A fill pass of B never evicts what a reader of A fetched during the pass (a reader in a loop): it stops
    // instead, B stays partial and says why. Before the fix it evicted A's blocks, the reader fetched them again,
    // which evicted B's, which the fill fetched again, for ever.
    func testAFillPassDoesNotEvictWhatAReaderFetchedDuringIt() throws {
        let store = try makeStore(maxBlocks: 12)
        let read = try entry(store, "read.bin"), filled = try entry(store, "filled.bin")
        XCTAssertEqual(fill(filled, store, newPass: true), .run(0..<4, next: 4))
        for index in 0..<4 { fetch(index, into: read, store) }  // a reader, during the pass
        XCTAssertEqual(fill(filled, store), .run(4..<8, next: 8))
        XCTAssertEqual(fill(filled, store), .noRoom, "the rest could only come by evicting blocks used in this pass")
        XCTAssertEqual(present(read), [0, 1, 2, 3], "the reader's blocks stay")
        XCTAssertEqual(present(filled), Array(0..<8), "and so do the fill's own")
        XCTAssertEqual(filled.fillRefusal, .outOfRoom(cap: 12 * 65536))
        XCTAssertEqual(store.ledger.usedBytes, 12 * 65536)
    }

    // What was used before the pass began is fair game, least recently used first: "this pass" is the fill's.
    func testAFillPassEvictsWhatWasUsedBeforeItBegan() throws {
        let store = try makeStore(maxBlocks: 12)
        let read = try entry(store, "read.bin"), filled = try entry(store, "filled.bin")
        for index in 0..<4 { fetch(index, into: read, store) }  // before the pass
        XCTAssertEqual(fill(filled, store, newPass: true), .run(0..<4, next: 4))
        XCTAssertEqual(fill(filled, store), .run(4..<8, next: 8))
        XCTAssertEqual(fill(filled, store), .run(8..<10, next: 0))
        XCTAssertTrue(filled.isComplete)
        XCTAssertEqual(present(read), [2, 3], "the two oldest blocks made room")
        XCTAssertNil(filled.fillRefusal)
    }

    // A fill's block that arrives when a reader took the room meanwhile is stored under the cap, and ends the pass.
    func testAFillBlockThatFindsNoSpareRoomEndsThePass() throws {
        let store = try makeStore(maxBlocks: 11)
        let read = try entry(store, "read.bin"), filled = try entry(store, "filled.bin")
        XCTAssertEqual(filled.claimFillRun(from: 0, limit: 4, newPass: true), .run(0..<4, next: 4))
        for index in 0..<10 { fetch(index, into: read, store) }  // the reader fills the cache meanwhile
        for index in 0..<4 { fetch(index, into: filled, store, background: true) }
        XCTAssertEqual(store.ledger.usedBytes, 11 * 65536, "the cap holds")
        XCTAssertEqual(filled.fillRefusal, .outOfRoom(cap: 11 * 65536))
        XCTAssertEqual(filled.claimFillRun(from: 4, limit: 4, newPass: false), .noRoom)
    }
}
