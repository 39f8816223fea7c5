import Dispatch
import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSControl
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 24: listings and probes without FUSE. Dead links are probed once and leave the directory, other failed
/// probes are remembered until the next listing or an open, and concurrent lookups share one listing.
final class DirectoryServiceTests: XCTestCase {
    let origin = MemoryOrigin()
    let base = "http://origin/dir/"
    var directory: TemporaryDirectory!
    var fileSystem: RangeFS!
    /// What the file system tells the kernel.
    let kernel = KernelRecorder()

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "directories")
        var page = "<html><body>\n"
        for name in ["a.bin", "b.bin"] + (1...40).map({ "dead\($0).bin" }) { page += "<a href=\"\(name)\">\(name)</a>\n" }
        origin.serve(base, bytes: Array(page.utf8))
        origin.serve(base + "a.bin", bytes: pseudoRandomBytes(count: 1000))
        origin.serve(base + "b.bin", bytes: pseudoRandomBytes(count: 2000))
        let logger = Logger(label: "test")
        let reports = EventQueue<EntryEvent>()
        let store = try CacheStore(root: directory.path, reports: reports, logger: logger)
        let catalog = Catalog()
        catalog.setRootURL(base)
        let scheduler = FetchScheduler(fetcher: origin, policy: FetchPolicy(), events: FetchScheduler.Events(reports: reports), logger: logger)
        var settings = FileSystemSettings()
        settings.revalidateAfter = nil
        fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports, kernel: kernel,
                             settings: settings, logger: logger)
    }

    override func tearDown() {
        fileSystem = nil
        directory = nil
        super.tearDown()
    }

    func probes(of name: String) -> Int { origin.probedURLs.filter { $0 == base + name }.count }

    /// Probes and data requests for `name`.
    func attempts(of name: String) -> Int { probes(of: name) + origin.requests.filter { $0.url == base + name }.count }

    func names() throws -> [String] {
        try fileSystem.directoryContents(Catalog.rootInode).get().map(\.name)
    }

    func testDeadLinksAreProbedOnceAndLeaveTheDirectory() throws {
        XCTAssertEqual(try names().count, 42, "readdir alone probes nothing")
        XCTAssertEqual(origin.probedURLs, [])
        XCTAssertEqual(fileSystem.lookup(parent: Catalog.rootInode, name: "dead1.bin"), .failure(.notFound))
        XCTAssertEqual(try fileSystem.lookup(parent: Catalog.rootInode, name: "a.bin").get().size, 1000)
        // Every lookup in `ls -l` order: each link probed once at most, batches take only never-probed names.
        for name in try names() { _ = fileSystem.lookup(parent: Catalog.rootInode, name: name) }
        XCTAssertEqual(try names(), ["a.bin", "b.bin"], "the dead links left")
        XCTAssertEqual(Set(origin.probedURLs).count, origin.probedURLs.count, "no link probed twice")
        XCTAssertEqual(origin.probedURLs.count, 42)
        XCTAssertEqual(fileSystem.lookup(parent: Catalog.rootInode, name: "dead7.bin"), .failure(.notFound))
        XCTAssertEqual(origin.probedURLs.count, 42, "a dead link is not probed again")
    }

    func testAFailedProbeIsNotRepeatedByLookupsButAnOpenTriesAgain() throws {
        origin.probesFail = true
        _ = try names()
        XCTAssertNotNil(try? fileSystem.lookup(parent: Catalog.rootInode, name: "a.bin").get(), "kept, with its error")
        XCTAssertEqual(probes(of: "a.bin"), 1)
        _ = fileSystem.lookup(parent: Catalog.rootInode, name: "a.bin")
        XCTAssertEqual(probes(of: "a.bin"), 1, "not probed again by a lookup")
        let status = ControlService(fileSystem: fileSystem).handle(ControlRequest(command: .status))
        XCTAssertEqual(status.files?.first { $0.name == "a.bin" }?.state, "error")
        let inode = try XCTUnwrap(fileSystem.catalog.node(named: "a.bin", in: Catalog.rootInode)).inode
        origin.isDown = true
        guard case .failure(.io) = fileSystem.open(inode) else { return XCTFail("the open's probe fails too") }
        XCTAssertEqual(attempts(of: "a.bin"), 2, "an open probes again")
        origin.isDown = false
        origin.probesFail = false
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 1000)?.get(),
                       pseudoRandomBytes(count: 1000))
        fileSystem.release(handle)
    }

    func testConcurrentLookupsShareOneListing() throws {
        origin.latency = 0.2
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            _ = fileSystem.lookup(parent: Catalog.rootInode, name: index % 2 == 0 ? "a.bin" : "b.bin")
        }
        XCTAssertEqual(origin.requests.filter { $0.url == base }.count, 1, "one listing for eight waiters")
        XCTAssertEqual(probes(of: "a.bin"), 1)
        XCTAssertEqual(probes(of: "b.bin"), 1)
    }

    // A reader who arrives as a listing ends joins it or sees its result; it never starts a second listing (CI saw
    // an `ls -lR` list one of 13 directories twice). Readers call at every moment of each listing's end, a
    // directory at a time: the catalog's "listed" and the service's "running" are read together.
    func testAReaderArrivingAsAListingEndsDoesNotListItAgain() throws {
        let service = fileSystem.directories
        let rounds = 400
        for round in 0..<rounds {
            let url = base + "sub\(round)/"
            origin.serve(url, bytes: Array("<html><body><a href=\"x.bin\">x.bin</a></body></html>".utf8))
            let inode = fileSystem.catalog.addDirectory(url: url, parent: Catalog.rootInode, fromListing: true).inode
            let listed = LockedBox(false)
            service.listNow(inode) { _ in listed.withLock { $0 = true } }
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                while !listed.withLock({ $0 }) { service.whenListed(inode) {} }
            }
            let inFlight = service.state.withLock { $0.listings[inode]?.running == true }
            XCTAssertFalse(inFlight, "round \(round): a second listing started after the first ended")
            XCTAssertEqual(origin.requests.filter { $0.url == url }.count, 1, "round \(round)")
            if inFlight { break }
        }
    }

    // The same for opens: one arriving as the probe of its file ends takes that probe's answer, and never
    // probes the file a second time.
    func testAnOpenArrivingAsItsFilesProbeEndsDoesNotProbeItAgain() throws {
        let service = fileSystem.directories
        for round in 0..<400 {
            let url = base + "probed\(round).bin"
            origin.serve(url, bytes: pseudoRandomBytes(count: 100, seed: UInt64(round)))
            let item = fileSystem.catalog.add(RemoteMetadata(url: url, size: 100, etag: "", lastModified: ""),
                                              listed: true, validated: false, attributesExact: false)
            let answered = LockedBox(false)
            service.whenValidated(item) { _ in answered.withLock { $0 = true } }
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                // As an open does: the file as the catalog shows it now, then the service.
                while !answered.withLock({ $0 }) {
                    service.whenValidated(fileSystem.catalog.item(inode: item.inode) ?? item) { _ in }
                }
            }
            let attempts = origin.probedURLs.filter { $0 == url }.count + origin.requests.filter { $0.url == url }.count
            XCTAssertEqual(attempts, 1, "round \(round): the file was probed \(attempts) times")
            if attempts != 1 { break }
        }
    }

    // Issue 25: the probe of a listed file being opened is its first data request.
    func testOpeningAListedFileIsOneRequestThatBringsItsFirstBytes() throws {
        _ = try names()
        let inode = try XCTUnwrap(fileSystem.catalog.node(named: "a.bin", in: Catalog.rootInode)).inode
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096)?.get(),
                       pseudoRandomBytes(count: 1000))
        fileSystem.release(handle)
        XCTAssertEqual(probes(of: "a.bin"), 0, "no one-byte probe")
        XCTAssertEqual(origin.requests.filter { $0.url == base + "a.bin" }.map(\.range),
                       [0..<UInt64(FileSystemSettings().openProbeBytes)], "one request brought the whole file")
    }

    func testALargerFileGetsItsFirstBlocksFromTheOpensProbe() throws {
        let big = "http://origin/big/", bytes = pseudoRandomBytes(count: 1_000_000, seed: 7)
        origin.serve(big, bytes: Array("<a href=\"c.bin\">c.bin</a>".utf8))
        origin.serve(big + "c.bin", bytes: bytes)
        let folder = fileSystem.catalog.addDirectory(url: big)
        _ = try fileSystem.directoryContents(folder.inode).get()
        let inode = try XCTUnwrap(fileSystem.catalog.node(named: "c.bin", in: folder.inode)).inode
        let handle = try fileSystem.open(inode).get().handle
        let first = FileSystemSettings().openProbeBytes
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: first)?.get(),
                       Array(bytes.prefix(first)))
        XCTAssertEqual(origin.requests.filter { $0.url == big + "c.bin" }.count, 1, "the first blocks came with the probe")
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 900_000, count: 1000)?.get(),
                       Array(bytes[900_000..<901_000]))
        fileSystem.release(handle)
        let entry = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(inode: inode)))
        XCTAssertEqual(entry.header.remoteMetadata.etag, "\"v1\"", "the probe's validators are the entry's")
    }

    func testAfterARemountAFileThatAgreesWithItsListingOpensFromTheCacheWithoutARequest() throws {
        let json = "http://origin/json/"
        let bytes = pseudoRandomBytes(count: 5000, seed: 3)
        origin.serve(json, bytes: Array(#"[{"name":"d.bin","type":"file","mtime":"\#(origin.lastModified)","size":5000}]"#.utf8))
        origin.serve(json + "d.bin", bytes: bytes)
        func mountAndRead(_ directory: String) throws -> [UInt8]? {
            let logger = Logger(label: "test")
            let reports = EventQueue<EntryEvent>()
            let store = try CacheStore(root: directory, reports: reports, logger: logger)
            // As a daemon stops: the next store on this directory waits for the lock instead of failing (the
            // lock goes with this store, once the work still holding it has finished; a CI run saw it held).
            defer {
                store.markStopping()
                store.close()
            }
            let catalog = Catalog()
            catalog.setRootURL(json)
            var settings = FileSystemSettings()
            settings.revalidateAfter = nil
            let scheduler = FetchScheduler(fetcher: origin, policy: FetchPolicy(), events: FetchScheduler.Events(reports: reports),
                                           logger: logger)
            let mounted = RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports,
                                  settings: settings, logger: logger)
            _ = try mounted.directoryContents(Catalog.rootInode).get()
            let inode = try XCTUnwrap(catalog.node(named: "d.bin", in: Catalog.rootInode)).inode
            let handle = try mounted.open(inode).get().handle
            defer { mounted.release(handle) }
            return try mounted.readSynchronously(handle: handle, offset: 0, count: 5000)?.get()
        }
        let cache = try TemporaryDirectory(prefix: "remount")
        XCTAssertEqual(try mountAndRead(cache.path), bytes)
        let before = origin.requests.filter { $0.url == json + "d.bin" }.count + origin.probeCount
        XCTAssertEqual(try mountAndRead(cache.path), bytes, "served from the cache")
        XCTAssertEqual(origin.requests.filter { $0.url == json + "d.bin" }.count + origin.probeCount, before,
                       "the cached version agrees with the listing: no probe, no data request")

        origin.serve(json + "d.bin", bytes: pseudoRandomBytes(count: 5000, seed: 4), etag: "\"v2\"")
        origin.serve(json, bytes: Array(#"[{"name":"d.bin","type":"file","mtime":"Mon, 07 Nov 1994 08:49:37 GMT","size":5000}]"#.utf8))
        XCTAssertEqual(try mountAndRead(cache.path), pseudoRandomBytes(count: 5000, seed: 4),
                       "a listing that states another date makes the open probe: the new version")
    }

    /// READDIRPLUS of the root from position 0 (as the kernel asks it), waited for.
    func readDirectoryPlus() throws -> [RangeFS.DirectoryEntry] {
        let handle = try fileSystem.openDirectory(Catalog.rootInode).get()
        defer { fileSystem.releaseDirectory(handle) }
        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<Result<[RangeFS.DirectoryEntry], FileSystemError>?>(nil)
        fileSystem.readDirectory(Catalog.rootInode, handle: handle, from: 0, count: 100, attributes: true) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "READDIRPLUS answered")
        return try XCTUnwrap(answer.withLock { $0 }).get()
    }

    // Issue 35: the kernel asks READDIRPLUS for a names-only `ls` too. Links whose listing states no size come as
    // plain names, without a probe; a lookup (`stat`, `ls -l`) probes them, and READDIRPLUS then hands over what it
    // found.
    func testReaddirplusOfLinksWithoutSizesSendsNoRequest() throws {
        let entries = try readDirectoryPlus()
        XCTAssertEqual(entries.map(\.name), try names(), "every name, the dead links too")
        XCTAssertTrue(entries.allSatisfy { $0.attributes == nil }, "no attributes without a probe")
        XCTAssertEqual(origin.probedURLs, [], "no probe")
        XCTAssertEqual(origin.requests.filter { $0.url != base }.count, 0, "no request but the listing")
        XCTAssertEqual(try fileSystem.lookup(parent: Catalog.rootInode, name: "a.bin").get().size, 1000)
        XCTAssertEqual(fileSystem.lookup(parent: Catalog.rootInode, name: "dead1.bin"), .failure(.notFound))
        let after = try readDirectoryPlus()
        XCTAssertEqual(after.first { $0.name == "a.bin" }?.attributes?.size, 1000, "probed: its attributes")
        XCTAssertFalse(after.contains { $0.name == "dead1.bin" }, "a dead link a lookup found left")
    }

    // Issue 35: a listed file's attributes are kept by the kernel while its entry is closed; when the entry opens
    // (here through the open's probe, which stores the first bytes), the kernel is told to drop them, and is
    // given them for no time while the entry fills, so `ls -s` shows the bytes as they come.
    func testAnEntryThatOpensMakesTheKernelDropTheAttributesItKeeps() throws {
        let json = "http://origin/json/"
        let listing = #"[{"name":"e.bin","type":"file","mtime":"\#(origin.lastModified)","size":3000}]"#
        origin.serve(json, bytes: Array(listing.utf8))
        origin.serve(json + "e.bin", bytes: pseudoRandomBytes(count: 3000, seed: 5))
        let folder = fileSystem.catalog.addDirectory(url: json)
        let found = try fileSystem.lookup(parent: folder.inode, name: "e.bin").get()
        XCTAssertEqual(found.cachedBytes, 0)
        XCTAssertGreaterThan(found.kernelCacheSeconds, 0, "kept as long as the listing is fresh")
        let handle = try fileSystem.open(found.inode).get().handle
        defer { fileSystem.release(handle) }
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 3000)?.get(),
                       pseudoRandomBytes(count: 3000, seed: 5))
        let deadline = Date().addingTimeInterval(30)
        let notices = kernel.wait { $0 == .attributes(found.inode) }
        XCTAssertEqual(notices.filter { if case .attributes = $0 { true } else { false } }, [.attributes(found.inode)],
                       "the kernel was told once to drop them")
        // The read is answered from the received bytes; they count as cached once written.
        while (try? fileSystem.attributes(of: found.inode).get().cachedBytes) != 3000 && Date() < deadline {
            usleep(10_000)
        }
        let now = try fileSystem.attributes(of: found.inode).get()
        XCTAssertEqual(now.cachedBytes, 3000)
        // Complete, with no cap to take blocks from it: its cached bytes change no more (SettledAttributesTests).
        XCTAssertGreaterThan(now.kernelCacheSeconds, 0, "kept again once the open entry is complete")
    }

    /// Issue 35: after a remount, opening the cache entry of a listed file that no probe has seen (`verify`,
    /// `pin`, `--prefetch=all`) opens the version the cache holds when the listing agrees with it, or states
    /// nothing exact; it never drops the data on the listing's attributes alone, and sends no request.
    func testAListedFileNotYetProbedOpensItsCachedVersionAndKeepsItsData() throws {
        let bytes = pseudoRandomBytes(count: 5000, seed: 5)
        let cache = try TemporaryDirectory(prefix: "remount")
        for (folder, listing) in [("exact/", #"[{"name":"d.bin","type":"file","mtime":"\#(origin.lastModified)","size":5000}]"#),
                                  ("plain/", #"<a href="d.bin">d.bin</a>"#)] {
            let url = "http://origin/" + folder
            origin.serve(url, bytes: Array(listing.utf8))
            origin.serve(url + "d.bin", bytes: bytes)
            func mount(_ use: (RangeFS, CatalogItem) throws -> Void) throws {
                try withListedFolder(url, of: origin, cache: cache.path) { mounted, catalog in
                    guard case .file(let item) = catalog.node(named: "d.bin", in: Catalog.rootInode) else {
                        return XCTFail("\(folder): no d.bin")
                    }
                    try use(mounted, item)
                }
            }
            try mount { mounted, item in
                let handle = try mounted.open(item.inode).get().handle
                defer { mounted.release(handle) }
                XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 5000)?.get(), bytes)
            }
            func fileRequests() -> Int {
                origin.requests.filter { $0.url == url + "d.bin" }.count + origin.probedURLs.filter { $0 == url + "d.bin" }.count
            }
            let before = fileRequests()
            try mount { mounted, item in
                XCTAssertFalse(item.validated, "\(folder): the listing's attributes, no probe yet")
                let entry = try mounted.entry(for: item)
                XCTAssertEqual(entry.cachedBytes, 5000, "\(folder): the cached version, whole")
                XCTAssertEqual(entry.verifyAll().checked, 1, folder)
            }
            XCTAssertEqual(fileRequests(), before, "\(folder): no request for the file")
        }
    }
}
