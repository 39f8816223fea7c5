import Foundation
import Logging
@testable import RangeFSCache
import RangeFSTestSupport
import Synchronization
import XCTest

/// Issue 46, "bounded under a cap": the LRU queue holds O(cached blocks) records however often they are read, and
/// under `--cache-max-size` idle entries are released (their descriptors and mappings with them) while their blocks
/// stay counted and evictable.
final class BoundedEvictionTests: XCTestCase {
    let logger = Logger(label: "test")
    let bytes = pseudoRandomBytes(count: 10 * 65536)
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "bounded-eviction")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func makeStore(maxBlocks: Int, idleEntryTime: Duration = .seconds(30)) throws -> CacheStore {
        var settings = StoreSettings()
        settings.maxBytes = maxBlocks * 65536
        settings.idleEntryTime = idleEntryTime
        return try CacheStore(root: directory.path, settings: settings, logger: logger)
    }

    func metadata(_ name: String, blocks: Int) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/\(name)", size: UInt64(blocks * 65536), etag: "\"1\"", lastModified: "")
    }

    /// Stores block `index` as a fetch does, and waits until it is written (and counted as used).
    func fetch(_ index: Int, into entry: CacheEntry, _ store: CacheStore) {
        let range = entry.byteRange(of: index..<(index + 1))
        let buffer = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { BlockBuffer(copying: $0) }
        entry.put(block: index, buffer: buffer, background: false, budgeted: true)
        store.waitForWrites()
    }

    /// Runs group commits (which release idle entries) until none of `urls` is open; false after a generous wait.
    func waitUntilReleased(_ urls: [String], _ store: CacheStore) -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            store.commitAll()
            if urls.allSatisfy({ store.openEntry(for: $0) == nil }) { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    func testRereadingTheSameBlocksKeepsTheQueueShort() throws {
        let store = try makeStore(maxBlocks: 10)
        let file = try store.entry(for: metadata("a.bin", blocks: 10), blockSize: 65536)
        for index in 0..<10 { fetch(index, into: file, store) }
        for round in 0..<10_000 { store.ledger.recordUse(file, blocks: (round % 10)..<(round % 10 + 1)) }
        let queued = store.ledger.eviction.withLock { $0.records.count - $0.head }
        XCTAssertLessThanOrEqual(queued, 10 * 10, "at most a small multiple of the 10 cached blocks, not one per read")
        // The order survives compaction: block 0, read longest ago, goes first.
        let other = try store.entry(for: metadata("b.bin", blocks: 1), blockSize: 65536)
        fetch(0, into: other, store)
        XCTAssertEqual((0..<10).filter(file.isPresent), Array(1..<10))
        XCTAssertEqual(store.ledger.usedBytes, 10 * 65536, "the cap holds")
    }

    func testIdleEntriesAreReleasedUnderACapAndTheirBlocksStillEvicted() throws {
        let store = try makeStore(maxBlocks: 4, idleEntryTime: .milliseconds(100))
        let names = ["a.bin", "b.bin", "c.bin"]
        for name in names {
            let entry = try store.entry(for: metadata(name, blocks: 1), blockSize: 65536)
            fetch(0, into: entry, store)
        }
        let urls = names.map { metadata($0, blocks: 1).url }
        XCTAssertTrue(waitUntilReleased(urls, store), "entries read once and left alone are released under a cap")
        XCTAssertEqual(store.ledger.usedBytes, 3 * 65536, "their blocks still count")
        // Opened again and released again, a file's bytes are counted once.
        _ = try store.entry(for: metadata("b.bin", blocks: 1), blockSize: 65536)
        XCTAssertEqual(store.ledger.usedBytes, 3 * 65536)
        XCTAssertTrue(waitUntilReleased(urls, store))

        // Two more blocks need room for one: a.bin's block, the least recently used, goes.
        let large = try store.entry(for: metadata("d.bin", blocks: 2), blockSize: 65536)
        fetch(0, into: large, store)
        fetch(1, into: large, store)
        XCTAssertEqual(store.ledger.usedBytes, 4 * 65536, "the cap holds")
        XCTAssertEqual(store.cachedBytes(of: metadata("a.bin", blocks: 1)), 0, "the released file's block was evicted")
        XCTAssertEqual(store.cachedBytes(of: metadata("b.bin", blocks: 1)), 65536)
        XCTAssertEqual(store.cachedBytes(of: metadata("c.bin", blocks: 1)), 65536)
        // The eviction is committed: released again, a.bin's files say it holds nothing.
        XCTAssertTrue(waitUntilReleased(urls + [metadata("d.bin", blocks: 2).url], store))
        XCTAssertEqual(store.cachedBytes(of: metadata("a.bin", blocks: 1)), 0)
        XCTAssertEqual(store.ledger.usedBytes, 4 * 65536)
    }

    // A guard: a pinned entry is never released (its pin lives in the open entry), so its blocks are never evicted.
    func testAPinnedEntryStaysOpenUnderACapAndKeepsItsBlocks() throws {
        let store = try makeStore(maxBlocks: 2, idleEntryTime: .milliseconds(100))
        let pinned = try store.entry(for: metadata("pinned.bin", blocks: 1), blockSize: 65536)
        pinned.setPinned(true)
        fetch(0, into: pinned, store)
        let other = try store.entry(for: metadata("other.bin", blocks: 1), blockSize: 65536)
        fetch(0, into: other, store)
        XCTAssertTrue(waitUntilReleased([metadata("other.bin", blocks: 1).url], store))
        XCTAssertTrue(store.openEntry(for: metadata("pinned.bin", blocks: 1).url) === pinned, "a pinned entry stays open")
        let large = try store.entry(for: metadata("large.bin", blocks: 2), blockSize: 65536)
        fetch(0, into: large, store)
        fetch(1, into: large, store)
        XCTAssertTrue(pinned.isPresent(0), "the pinned block stays")
        XCTAssertEqual(store.cachedBytes(of: metadata("other.bin", blocks: 1)), 0, "the released file's block went")
    }

    // Eviction under a cap reopens released entries through the store's hook. Kept in a `Mutex` as a bare closure,
    // the hook came back from each `withLock { $0 }` wrapped in two more reabstraction thunks, written back through
    // the `inout`: each reopen went through two more calls than the last. 100,000 files of 8 KB under
    // `--cache-max-size 200M` stalled the daemon near the 38,500th file, its threads 135,000 frames deep (issue 46,
    // acceptance 7). However often the hook is called, its caller's stack stays as deep as at the first call.
    func testTheReopenHookCostsTheSameAtItsThousandthCallAsAtItsFirst() throws {
        let store = try makeStore(maxBlocks: 4)
        let depths = Mutex<[Int]>([])
        store.ledger.reopenHook.withLock {
            $0 = ReopenHook { _ in
                depths.withLock { $0.append(Thread.callStackReturnAddresses.count) }
                return false
            }
        }
        for _ in 0..<1_000 { store.ledger.reopenDormant("http://origin/released.bin") }
        let seen = depths.withLock { $0 }
        XCTAssertEqual(seen.count, 1_000)
        XCTAssertEqual(Set(seen).count, 1, "the hook's stack depth grew from \(seen.first ?? 0) to \(seen.last ?? 0) frames")
    }
}
