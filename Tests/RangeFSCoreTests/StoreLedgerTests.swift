import Dispatch
import Logging
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 39: a cache entry holds its store's ledger (StoreLedger.swift), never its store. No FUSE, no network: a
/// real store on a real disk.
final class StoreLedgerTests: FolderTestCase {
    override class var folderPrefix: String { "ledger" }

    // An entry that outlives its store (a handle's, a test's) keeps nothing of it alive, and goes on storing
    // blocks without waiting for group commits that can no longer come: its ledger is told the store is gone.
    func testAnEntryThatOutlivesItsStoreLetsItGoAndStoresWithoutWaitingForCommits() throws {
        var settings = StoreSettings()
        settings.commitInterval = .seconds(3600)
        settings.commitBytes = 64 << 10  // the writer would wait once two blocks wait for a commit
        var store: CacheStore? = try CacheStore(root: directory.path, settings: settings, logger: logger)
        weak var released = store
        let blocks = 8
        let bytes = pseudoRandomBytes(count: blocks * 65536)
        let url = "http://origin/outlives.bin"
        let entry = try XCTUnwrap(store).entry(for: RemoteMetadata(url: url, size: UInt64(bytes.count), etag: "\"e\"",
                                                                   lastModified: ""), blockSize: 65536)
        store = nil
        XCTAssertNil(released, "an entry, its ledger or the ledger's commit trigger keeps the store alive")
        let pipeline = entry.pipeline
        let stored = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            for index in 0..<blocks {
                let buffer = bytes[(index * 65536)..<((index + 1) * 65536)].withUnsafeBytes { BlockBuffer(copying: $0) }
                entry.put(block: index, buffer: buffer, background: false, budgeted: true)
            }
            pipeline.waitForWrites()
            stored.signal()
        }
        // Writing 512 KiB takes milliseconds; a writer waiting for a commit waits 30 s per block past the bound.
        XCTAssertEqual(stored.wait(timeout: .now() + 25), .success, "the writer waits for commits of a store that is gone")
        XCTAssertEqual(entry.presentBlocks.setCount, blocks)
    }
}
