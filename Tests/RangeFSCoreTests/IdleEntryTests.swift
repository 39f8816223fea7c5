import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 24: memory follows the files in use. An entry nobody has used for a while is released, keeps telling
/// how much of its file is cached, and opens again with its blocks; one held by a handle or with work queued stays.
final class IdleEntryTests: XCTestCase {
    var directory: TemporaryDirectory!
    let bytes = pseudoRandomBytes(count: 200_000)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "idle")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func makeStore() throws -> CacheStore {
        var settings = StoreSettings()
        settings.idleEntryTime = .zero
        return try CacheStore(root: directory.path, settings: settings, logger: Logger(label: "test"))
    }

    func metadata(_ index: Int) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/f\(index).bin", size: 200_000, etag: "\"\(index)\"", lastModified: "")
    }

    /// Stores blocks 0 and 2 of entry `index`.
    func storeTwoBlocks(_ entry: CacheEntry) {
        for block in [0, 2] {
            let range = entry.byteRange(of: block..<(block + 1))
            _ = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { entry.store(block: block, bytes: $0) }
        }
    }

    func testAnIdleEntryIsReleasedKeepsItsCountAndReopensWithItsBlocks() throws {
        let store = try makeStore()
        let entry = try store.entry(for: metadata(1), blockSize: 65536)
        storeTwoBlocks(entry)
        let cached = entry.cachedBytes
        XCTAssertEqual(cached, 2 * 65536)
        store.commitAll()  // commits, then releases what is idle
        XCTAssertNil(store.openEntry(for: metadata(1).url), "released")
        XCTAssertTrue(entry.isStale, "nothing fetches into a released entry")
        XCTAssertEqual(store.cachedBytes(of: metadata(1)), cached, "its count without opening it")
        XCTAssertEqual(store.cachedBytes(of: metadata(2)), 0)
        let reopened = try store.entry(for: metadata(1), blockSize: 65536)
        XCTAssertFalse(reopened === entry)
        XCTAssertEqual(reopened.presentBlocks.clearRuns(in: 0..<4), [1..<2, 3..<4])
        XCTAssertEqual(try reopened.readPresent(reopened.byteRange(of: 2..<3)), Array(bytes[131_072..<196_608]))
    }

    /// After a remount, the walk-ahead of a re-read tree asks each file's stored version, then `ls -l` and the
    /// open ask what it holds: the entry's files are read once for all of them (each read them again before:
    /// 15% of the daemon's CPU in a re-read of 3,000 small files). Shown by removing the files after the first look.
    func testAStoredVersionIsReadFromItsFilesOnceAndRemembered() throws {
        do {
            let store = try makeStore()
            storeTwoBlocks(try store.entry(for: metadata(1), blockSize: 65536))
            store.commitAll()
        }
        let store = try makeStore()
        XCTAssertEqual(store.storedVersion(of: metadata(1).url), metadata(1))
        XCTAssertNil(store.storedVersion(of: metadata(2).url))
        try EntryFiles(root: directory.path, url: metadata(1).url).removeFiles()
        XCTAssertEqual(store.storedVersion(of: metadata(1).url), metadata(1), "remembered, not read again")
        XCTAssertEqual(store.cachedBytes(of: metadata(1)), 2 * 65536, "the same summary answers")
        XCTAssertNil(store.storedVersion(of: metadata(2).url))
    }

    func testAnEntryInUseOrWithWorkStaysOpen() throws {
        // Work for an entry (a fill, a transfer, a digest check) is counted on the entry by whoever has it: the
        // store reads it there and asks nobody above (issue 48).
        let store = try makeStore()
        let held = try store.entryInUse(for: metadata(1), blockSize: 65536)
        storeTwoBlocks(held)
        let busy = try store.entry(for: metadata(2), blockSize: 65536)
        busy.use.addWork(1)
        store.commitAll()
        XCTAssertTrue(store.openEntry(for: metadata(1).url) === held, "a handle holds it")
        XCTAssertTrue(store.openEntry(for: metadata(2).url) === busy, "work is queued or running for it")
        held.use.end()
        busy.use.addWork(-1)
        store.commitAll()
        XCTAssertNil(store.openEntry(for: metadata(1).url))
        XCTAssertNil(store.openEntry(for: metadata(2).url))
    }

    func testReleaseCommitsFirstAndWaitsForTheIdleTime() throws {
        // Default settings: an entry used just now stays open.
        let patient = try CacheStore(root: directory.path + "/patient", logger: Logger(label: "test"))
        let recent = try patient.entry(for: metadata(1), blockSize: 65536)
        storeTwoBlocks(recent)
        patient.commitAll()
        XCTAssertTrue(patient.openEntry(for: metadata(1).url) === recent, "used less than 30 s ago")
        // Released only by the commit that makes its blocks durable: never with progress that is not on disk.
        let store = try makeStore()
        let entry = try store.entry(for: metadata(1), blockSize: 65536)
        storeTwoBlocks(entry)
        XCTAssertEqual(entry.durableBlocks.setCount, 0)
        store.commitAll()
        XCTAssertNil(store.openEntry(for: metadata(1).url))
        XCTAssertEqual(entry.durableBlocks.clearRuns(in: 0..<4), [1..<2, 3..<4], "committed before its release")
    }
}
