import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46: after a remount, the walk-ahead reads each small file's entry for its summary, and the open that
/// follows took what that read found instead of reading the file again; never a read older than the files.
final class LoadedAheadTests: FolderTestCase {
    override class var folderPrefix: String { "ahead" }
    let bytes = pseudoRandomBytes(count: 200_000)

    func makeStore() throws -> CacheStore {
        var settings = StoreSettings()
        settings.idleEntryTime = .zero
        return try CacheStore(root: directory.path, settings: settings, logger: logger)
    }

    let metadata = RemoteMetadata(url: "http://origin/f.bin", size: 200_000, etag: "\"1\"", lastModified: "")

    /// Stores `blocks` of the file in `entry`.
    func put(_ blocks: [Int], in entry: CacheEntry) {
        for block in blocks {
            let range = entry.byteRange(of: block..<(block + 1))
            _ = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { entry.store(block: block, bytes: $0) }
        }
    }

    /// The open takes what the summary read: shown by damaging the file's footer after the summary, which a second
    /// read would find (and start the entry empty). The bytes stay checked by their CRCs when read.
    func testTheOpenAfterASummaryTakesWhatItsReadFound() throws {
        do {
            let first = try makeStore()
            put([0, 2], in: try first.entry(for: metadata, blockSize: 65536))
            first.commitAll()
        }
        let store = try makeStore()
        XCTAssertEqual(store.storedVersion(of: metadata.url), metadata)
        let path = EntryFiles(root: directory.path, url: metadata.url).base
        let file = try SystemFile(path: path, flags: O_RDWR)
        let length = try file.status().size
        try file.write([UInt8](repeating: 0xFF, count: EntryFooter.length), at: length - UInt64(EntryFooter.length))
        let entry = try store.entry(for: metadata, blockSize: 65536)
        XCTAssertEqual(entry.presentBlocks.clearRuns(in: 0..<4), [1..<2, 3..<4], "the summary's read, taken")
        XCTAssertTrue(try entry.readPresent(entry.byteRange(of: 2..<3)) == Array(bytes[131_072..<196_608]))
    }

    /// A read is taken once: the next open (after the entry's release) reads the files again, and finds what
    /// the entry wrote while it was open.
    func testAReadIsTakenOnceAndAReleasedEntryIsReadAgain() throws {
        do {
            let first = try makeStore()
            put([0], in: try first.entry(for: metadata, blockSize: 65536))
            first.commitAll()
        }
        let store = try makeStore()
        XCTAssertEqual(store.storedVersion(of: metadata.url), metadata)
        XCTAssertEqual(store.summaries.withLock { $0.loadedAhead.count }, 1)
        let entry = try store.entry(for: metadata, blockSize: 65536)
        XCTAssertEqual(store.summaries.withLock { $0.loadedAhead.count }, 0, "taken by the open")
        put([1, 3], in: entry)
        store.commitAll()  // commits, then releases it
        XCTAssertNil(store.openEntry(for: metadata.url))
        let reopened = try store.entry(for: metadata, blockSize: 65536)
        XCTAssertEqual(reopened.presentBlocks.clearRuns(in: 0..<4), [2..<3])
    }

    /// A read of an entry of one block, as a summary makes it.
    func aRead() throws -> LoadedAhead.Read {
        let store = try makeStore()
        put([0], in: try store.entry(for: metadata, blockSize: 65536))
        store.commitAll()
        let stored = try XCTUnwrap(store.storedEntry(for: metadata.url))
        return LoadedAhead.Read(loaded: try XCTUnwrap(stored.loaded), digest: nil)
    }

    /// A read that a change of its entry overtook is not kept; one that only other entries' changes overtook is.
    func testAReadOvertakenByAChangeOfItsEntryIsNotKept() throws {
        let found = try aRead()
        var ahead = LoadedAhead()
        var since = ahead.current
        ahead.forget("http://origin/other")
        XCTAssertTrue(ahead.keep(found, of: metadata.url, since: since))
        XCTAssertNotNil(ahead.take(metadata.url))
        XCTAssertNil(ahead.take(metadata.url), "once")
        since = ahead.current
        ahead.forget(metadata.url)
        ahead.forget("http://origin/other")
        // What a summary's read asks before it is remembered (issue 50: an evict deleting the files meanwhile).
        XCTAssertTrue(ahead.overtaken(metadata.url, since: since))
        XCTAssertFalse(ahead.overtaken("http://origin/third", since: since))
        XCTAssertFalse(ahead.overtaken(metadata.url, since: ahead.current))
        XCTAssertFalse(ahead.keep(found, of: metadata.url, since: since))
        XCTAssertNil(ahead.take(metadata.url))
        // Kept, then its entry changes: dropped.
        XCTAssertTrue(ahead.keep(found, of: metadata.url, since: ahead.current))
        ahead.forget(metadata.url)
        XCTAssertNil(ahead.take(metadata.url))
        // Begun before more forgets than the log holds: whether one was its own is unknown, so not kept.
        since = ahead.current
        for index in 0..<(2 * LoadedAhead.capacity) { ahead.forget("http://origin/\(index)") }
        XCTAssertFalse(ahead.keep(found, of: metadata.url, since: since))
    }

    /// At most `capacity` reads are kept, the oldest going first; keeping and taking stays bounded.
    func testKeptReadsAreBounded() throws {
        let found = try aRead()
        var ahead = LoadedAhead()
        for index in 0..<(LoadedAhead.capacity + 10) {
            ahead.keep(found, of: "http://origin/\(index)", since: ahead.current)
            if index == 100 { ahead.keep(found, of: "http://origin/0", since: ahead.current) }  // kept again: younger
        }
        XCTAssertEqual(ahead.count, LoadedAhead.capacity)
        XCTAssertNotNil(ahead.take("http://origin/0"), "kept again, so not among the oldest")
        XCTAssertNil(ahead.take("http://origin/1"))
        XCTAssertNotNil(ahead.take("http://origin/\(LoadedAhead.capacity + 9)"))
        for index in 0..<10_000 {
            ahead.keep(found, of: "http://origin/x\(index)", since: ahead.current)
            _ = ahead.take("http://origin/x\(index)")
        }
        XCTAssertLessThanOrEqual(ahead.mentions, 5 * LoadedAhead.capacity)
        XCTAssertLessThanOrEqual(ahead.count, LoadedAhead.capacity)
    }
}
