import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46: after a remount, a reader that opens a directory's cached files in listing order finds the next ones
/// ready: the directory prefetch opens each one's cache entry and checks its blocks (the one-pass check of a
/// complete file from an earlier run) beside the reader, so the open itself neither reads the entry again nor
/// waits for the check. A file cached in part is left to its open.
final class PreparedEntriesTests: XCTestCase {
    let origin = MemoryOrigin()
    let folder = "http://origin/small/"
    let names = (0..<12).map { String(format: "f%02d.bin", $0) }
    var cache: TemporaryDirectory!

    override func setUpWithError() throws {
        cache = try TemporaryDirectory(prefix: "prepared")
        let objects = names.map { #"{"name":"\#($0)","type":"file","mtime":"\#(origin.lastModified)","size":5000}"# }
        origin.serve(folder, bytes: Array(("[" + objects.joined(separator: ",") + "]").utf8))
        for (index, name) in names.enumerated() {
            origin.serve(folder + name, bytes: pseudoRandomBytes(count: 5000, seed: UInt64(index + 1)))
        }
    }

    override func tearDown() {
        cache = nil
        super.tearDown()
    }

    private func mount(_ use: (RangeFS, Catalog) throws -> Void) throws {
        try withListedFolder(folder, of: origin, cache: cache.path, use)
    }

    private func item(_ name: String, in catalog: Catalog) throws -> CatalogItem {
        guard case .file(let item) = catalog.node(named: name, in: Catalog.rootInode) else {
            throw TestSupportError("no \(name) listed")
        }
        return item
    }

    /// Opens `name`, reads it whole and checks its bytes.
    private func read(_ name: String, _ mounted: RangeFS, _ catalog: Catalog) throws {
        let index = names.firstIndex(of: name)!
        let handle = try mounted.open(try item(name, in: catalog).inode).get().handle
        defer { mounted.release(handle) }
        XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 5000)?.get(),
                       pseudoRandomBytes(count: 5000, seed: UInt64(index + 1)), name)
    }

    func testAfterARemountTheNextCachedFilesAreOpenedAndCheckedAheadOfTheirReader() throws {
        try mount { mounted, catalog in
            for name in names { try read(name, mounted, catalog) }
        }
        func fileRequests() -> Int {
            origin.requests.filter { $0.url != folder }.count + origin.probedURLs.filter { $0 != folder }.count
        }
        let requests = fileRequests()
        try mount { mounted, catalog in
            // Three opens in order: the prefetch starts after the second, and looks at the files after it.
            for name in names.prefix(3) { try read(name, mounted, catalog) }
            let next = try item("f03.bin", in: catalog)
            let deadline = Date().addingTimeInterval(30)
            while mounted.store.openEntry(for: next.metadata.url) == nil && Date() < deadline { usleep(5_000) }
            let entry = try XCTUnwrap(mounted.store.openEntry(for: next.metadata.url),
                                      "the next file's entry was opened before its reader came")
            while entry.awaitsOnePassCheck && Date() < deadline { usleep(5_000) }
            XCTAssertFalse(entry.awaitsOnePassCheck, "and its blocks checked")
            XCTAssertFalse(mounted.isOpen(next.inode), "no handle of it yet")
            for name in names.dropFirst(3) { try read(name, mounted, catalog) }
        }
        XCTAssertEqual(fileRequests(), requests, "no request for a file after the remount (the listing only)")
    }

    func testADamagedFileFoundAheadIsFetchedAgainByItsOpen() throws {
        try mount { mounted, catalog in
            for name in names { try read(name, mounted, catalog) }
        }
        // A byte of f03.bin's data changes on disk: its CRC no longer matches.
        try mount { mounted, catalog in
            let path = mounted.store.entryFiles(for: try item("f03.bin", in: catalog).metadata.url).base
            let file = try FileHandle(forUpdating: URL(fileURLWithPath: path))
            try file.seek(toOffset: 10)
            let byte = try XCTUnwrap(try file.read(upToCount: 1)).first!
            try file.seek(toOffset: 10)
            try file.write(contentsOf: [byte ^ 0xFF])
            try file.close()
        }
        let before = origin.requests.filter { $0.url == folder + "f03.bin" }.count
        try mount { mounted, catalog in
            for name in names.prefix(3) { try read(name, mounted, catalog) }
            let damaged = try item("f03.bin", in: catalog)
            let deadline = Date().addingTimeInterval(30)
            while mounted.store.openEntry(for: damaged.metadata.url) == nil && Date() < deadline { usleep(5_000) }
            let entry = try XCTUnwrap(mounted.store.openEntry(for: damaged.metadata.url))
            while entry.isComplete && Date() < deadline { usleep(5_000) }
            XCTAssertFalse(entry.isComplete, "the check ahead found the damaged block and dropped it")
            try read("f03.bin", mounted, catalog)
        }
        XCTAssertGreaterThan(origin.requests.filter { $0.url == folder + "f03.bin" }.count, before,
                             "its open fetched the dropped block again")
    }

    /// The race the prefetch's own thread opened: it validates the next files from their listing while the reader
    /// opens them. An open that found a file validated before the listing's check of it was recorded sent a check
    /// of its own (`--revalidate`'s, `Range: bytes=0-0`): one or two requests in about half the remounts of 3,000
    /// files. The record now comes first: when a file shows as validated, its check is known.
    func testAListingsCheckIsRecordedBeforeTheFileShowsAsValidated() throws {
        // Answers dated now, as a server's are: the listing's date (1994) ends before them, which proves the
        // cached version current.
        origin.extraHeaders["date"] = HTTPDate.format(Int64(Date().timeIntervalSince1970))
        try mount { mounted, catalog in
            for name in names { try read(name, mounted, catalog) }
        }
        let logger = Logger(label: "test")
        let store = try CacheStore(root: cache.path, logger: logger)
        defer {
            store.markStopping()
            store.close()
        }
        let catalog = Catalog()
        catalog.setRootURL(folder)
        let seenValidated = LockedBox<[Bool]>([])
        var events = DirectoryService.Events()
        events.validated = { url, _ in
            seenValidated.withLock { $0.append(catalog.item(url: url)?.validated ?? false) }
        }
        // No first bytes with a probe and no walk ahead: the test counts the probes' requests alone.
        var settings = FileSystemSettings()
        (settings.directoryCacheTime, settings.openProbeBytes, settings.walkAheadListings) = (.seconds(60), 0, 0)
        let directories = DirectoryService(catalog: catalog, store: store, fetcher: origin, settings: settings,
                                           events: events, logger: logger)
        let listed = DispatchSemaphore(value: 0)
        directories.whenListed(Catalog.rootInode) { listed.signal() }
        XCTAssertEqual(listed.wait(timeout: .now() + 30), .success)
        let file = try item("f05.bin", in: catalog)
        XCTAssertFalse(file.validated)
        let validated = LockedBox<CatalogItem?>(nil)
        directories.whenValidated(file) { result in validated.withLock { $0 = try? result.get() } }
        XCTAssertEqual(validated.withLock { $0?.validated }, true, "validated by its listing, at once")
        XCTAssertEqual(seenValidated.withLock { $0 }, [false],
                       "the listing's check was recorded once, before the file showed as validated")
    }
}
