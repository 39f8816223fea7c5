import Foundation
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 46: `ls -l` of a million listed files asks each how much of it is cached, and nearly none has an entry.
/// The names of the entries on disk are read once (EntryIndex.swift): a file without one is answered from memory,
/// with no lookup on disk and nothing remembered per file; every entry, made before the store or after its index
/// was read, is still found.
final class EntryIndexTests: FolderTestCase {
    override class var folderPrefix: String { "entry-index" }
    let bytes = pseudoRandomBytes(count: 200_000)

    /// A store that releases an entry as soon as it is idle, so that what it holds is read from its files.
    func makeStore() throws -> CacheStore {
        var settings = StoreSettings()
        settings.idleEntryTime = .zero
        return try CacheStore(root: directory.path, settings: settings, logger: logger)
    }

    func metadata(_ index: Int) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/f\(index).bin", size: 200_000, etag: "\"\(index)\"", lastModified: "")
    }

    /// Stores block 1 of `entry` and commits the store (which releases the idle entry).
    func storeOneBlock(_ entry: CacheEntry, in store: CacheStore) {
        let range = entry.byteRange(of: 1..<2)
        _ = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { entry.store(block: 1, bytes: $0) }
        store.commitAll()
    }

    func testFilesWithoutAnEntryAreAnsweredWithoutRememberingEach() throws {
        let store = try makeStore()
        for index in 0..<1000 {
            XCTAssertEqual(store.cachedBytes(of: metadata(index), matchingSizeOnly: true), 0)
            XCTAssertNil(store.storedVersion(of: metadata(index).url))
        }
        let remembered = store.summaries.withLock { $0.absent.count + $0.known.count }
        XCTAssertEqual(remembered, 0, "a file that has no entry costs nothing to remember")
    }

    func testEntriesMadeBeforeTheStoreAndAfterItsIndexWasReadAreFound() throws {
        do {
            let earlier = try makeStore()
            storeOneBlock(try earlier.entry(for: metadata(1), blockSize: 65536), in: earlier)
        }
        let store = try makeStore()
        XCTAssertEqual(store.cachedBytes(of: metadata(1)), 65536, "an entry of an earlier mount")
        XCTAssertEqual(store.cachedBytes(of: metadata(2)), 0, "read the index: no entry of f2 yet")
        storeOneBlock(try store.entry(for: metadata(2), blockSize: 65536), in: store)
        XCTAssertNil(store.openEntry(for: metadata(2).url), "released: answered from its files")
        XCTAssertEqual(store.cachedBytes(of: metadata(2)), 65536, "an entry made after the index was read")
        XCTAssertEqual(store.storedVersion(of: metadata(2).url)?.etag, "\"2\"")
    }

    func testAKeyIsTheEntrysNameOnDisk() {
        let url = "http://origin/f1.bin"
        XCTAssertEqual(EntryIndex.Key(url: url), EntryIndex.Key(name: EntryFiles(root: "/c", url: url).name))
        XCTAssertNil(EntryIndex.Key(name: "not-hex-but-thirty-two-bytes-lon"))
        XCTAssertNil(EntryIndex.Key(name: "ab"))
    }
}
