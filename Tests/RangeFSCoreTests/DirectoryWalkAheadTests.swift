import Dispatch
import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 36: trees walked ahead, without FUSE (DirectoryService+WalkAhead.swift). A directory read lists its
/// subdirectories ahead, bounded; a lookup does not; a reader shares a listing ahead; a server that refuses parallel
/// listings (lighttpd's 503) ends the walk and costs the reader no error.
final class DirectoryWalkAheadTests: XCTestCase {
    let origin = MemoryOrigin()
    let base = "http://origin/tree/"
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "walkahead")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// Serves `names` as the HTML listing of `url` (a name ending in `/` is a subdirectory).
    func serveListing(_ url: String, _ names: [String]) {
        let page = names.map { "<a href=\"\($0)\">\($0)</a>" }.joined(separator: "\n")
        origin.serve(url, bytes: Array("<html><body>\n\(page)\n</body></html>\n".utf8))
    }

    func makeFileSystem(fetcher: RangeFetching? = nil) throws -> RangeFS {
        let logger = Logger(label: "test")
        let reports = EventQueue<EntryEvent>()
        let store = try CacheStore(root: directory.path, reports: reports, logger: logger)
        let catalog = Catalog()
        catalog.setRootURL(base)
        let scheduler = FetchScheduler(fetcher: fetcher ?? origin, policy: FetchPolicy(), events: FetchScheduler.Events(reports: reports),
                                       logger: logger)
        var settings = FileSystemSettings()
        settings.revalidateAfter = nil
        return RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports, settings: settings,
                       logger: logger)
    }

    /// Reads directory `inode` from its start as `ls` does; `reply` gets the names.
    func readDirectory(_ fileSystem: RangeFS, _ inode: UInt64,
                       reply: @escaping @Sendable (Result<[String], FileSystemError>) -> Void) {
        guard case .success(let handle) = fileSystem.openDirectory(inode) else { return reply(.failure(.notFound)) }
        fileSystem.readDirectory(inode, handle: handle, from: 0, count: 1000, attributes: true) { result in
            fileSystem.releaseDirectory(handle)
            reply(result.map { $0.map(\.name) })
        }
    }

    func readDirectory(_ fileSystem: RangeFS, _ inode: UInt64) throws -> [String] {
        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<Result<[String], FileSystemError>?>(nil)
        readDirectory(fileSystem, inode) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "readdir answered")
        return try XCTUnwrap(answer.withLock { $0 }).get()
    }

    func inode(_ fileSystem: RangeFS, _ name: String, in parent: UInt64 = Catalog.rootInode) throws -> UInt64 {
        try fileSystem.lookup(parent: parent, name: name).get().inode
    }

    func listings(_ prefix: String = "") -> [String] {
        origin.requests.filter { $0.accept != nil && $0.url.hasPrefix(base + prefix) && $0.url != base }.map(\.url)
    }

    /// Waits until no listing ahead is queued or in flight.
    func waitForTheWalk(_ fileSystem: RangeFS) {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let idle = fileSystem.directories.state.withLock { state in
                state.walkAhead.inFlight == 0 && state.walkAhead.queue.isEmpty
            }
            if idle { return }
            usleep(5000)
        }
        XCTFail("the walk ahead did not end")
    }

    // A lookup lists nothing ahead; reading the root lists its subdirectories and theirs (two levels), each once,
    // and reading a subdirectory then costs no request.
    func testReadingADirectoryListsTwoLevelsAheadAndALookupNothing() throws {
        serveListing(base, ["a/", "b/", "top.bin"])
        for name in ["a", "b"] {
            serveListing(base + name + "/", ["inner/", "x.bin"])
            serveListing(base + name + "/inner/", ["deeper/", "y.bin"])
            serveListing(base + name + "/inner/deeper/", ["z.bin"])
        }
        let fileSystem = try makeFileSystem()
        let a = try inode(fileSystem, "a")
        waitForTheWalk(fileSystem)
        XCTAssertEqual(listings(), [], "a lookup lists nothing ahead")
        XCTAssertEqual(try readDirectory(fileSystem, Catalog.rootInode), ["a", "b", "top.bin"])
        waitForTheWalk(fileSystem)
        XCTAssertEqual(Set(listings()), [base + "a/", base + "b/", base + "a/inner/", base + "b/inner/"])
        XCTAssertEqual(listings().count, 4, "each once")
        XCTAssertEqual(try readDirectory(fileSystem, a), ["inner", "x.bin"])
        XCTAssertEqual(listings("a/").filter { $0 == base + "a/" }.count, 1, "read from the listing made ahead")
        // Reading a/ walks on from there: a/inner/deeper/ is two levels below it.
        waitForTheWalk(fileSystem)
        XCTAssertTrue(listings().contains(base + "a/inner/deeper/"))
        XCTAssertFalse(listings().contains(base + "b/inner/deeper/"), "nothing below what was read but two levels")
    }

    // One directory read starts at most `walkAheadDirectories` listings ahead: the first ones in name order.
    func testAWideDirectoryListsAtMostTheBoundAhead() throws {
        let names = (0..<100).map { String(format: "s%03d/", $0) }
        serveListing(base, names)
        for name in names { serveListing(base + name, ["t/"]) }
        let fileSystem = try makeFileSystem()
        _ = try readDirectory(fileSystem, Catalog.rootInode)
        waitForTheWalk(fileSystem)
        let bound = DirectoryService.walkAheadDirectories
        XCTAssertEqual(listings().sorted(), names.prefix(bound).map { base + $0 })
        XCTAssertLessThanOrEqual(origin.peakConcurrency, 12 + 1, "12 listings ahead at once, and the root's")
    }

    // lighttpd refuses a second listing in progress with 503. The listings ahead it refuses end the walk for the
    // mount; a reader's listing refused while one ahead is in progress is made again once that one ends, and every
    // directory reads right.
    func testAServerThatRefusesParallelListingsEndsTheWalkAndReadersStillList() throws {
        let names = (0..<6).map { "sub\($0)/" }
        serveListing(base, names)
        for name in names { serveListing(base + name, ["in.bin"]) }
        let server = OneListingAtATime(origin: origin, held: [base + "sub0/"])
        let fileSystem = try makeFileSystem(fetcher: server)
        _ = try readDirectory(fileSystem, Catalog.rootInode)
        // The refusals are taken in once only sub0's listing ahead (held) is in flight.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, fileSystem.directories.state.withLock({ $0.walkAhead.inFlight != 1 }) { usleep(5000) }
        XCTAssertTrue(fileSystem.directories.state.withLock { $0.walkAhead.stopped }, "503: no more listings ahead")
        XCTAssertEqual(Set(server.refused), Set(names.dropFirst().map { base + $0 }))
        // sub0's listing ahead is in progress (held): a reader's listing of sub1 is refused, and made again later.
        let sub1 = try inode(fileSystem, "sub1")
        let answer = LockedBox<Result<[String], FileSystemError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        readDirectory(fileSystem, sub1) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        XCTAssertEqual(server.refused.filter { $0 == base + "sub1/" }.count, 2, "the reader's listing was refused too")
        XCTAssertNil(answer.withLock { $0 }, "it waits for the listing ahead to end")
        server.release()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(try XCTUnwrap(answer.withLock { $0 }).get(), ["in.bin"])
        for name in names {
            XCTAssertEqual(try readDirectory(fileSystem, try inode(fileSystem, String(name.dropLast()))), ["in.bin"])
        }
    }
}

/// An origin that answers 503 to a listing while another is in progress, as lighttpd does, and holds the listings
/// of `held` until released.
final class OneListingAtATime: RangeFetching, @unchecked Sendable {
    // @unchecked Sendable: the mutable state is guarded by `lock`.
    private let origin: MemoryOrigin
    private let lock = NSLock()
    private var inProgress = 0
    private var held: Set<String>
    private var waiting: [(RangeRequest, RangeResponseSink)] = []
    private var refusedURLs: [String] = []

    init(origin: MemoryOrigin, held: Set<String>) {
        self.origin = origin
        self.held = held
    }

    var refused: [String] { lock.withLock { refusedURLs } }

    /// Lets the held listings go on.
    func release() {
        let go = lock.withLock {
            held = []
            defer { waiting = [] }
            return waiting
        }
        for (request, sink) in go {
            origin.start(request, sink: Ending(sink) { self.lock.withLock { self.inProgress -= 1 } })
        }
    }

    func start(_ request: RangeRequest, sink: RangeResponseSink) {
        guard request.accept != nil else { return origin.start(request, sink: sink) }
        enum Next { case refuse, hold, pass }
        let next = lock.withLock { () -> Next in
            if inProgress > 0 {
                refusedURLs.append(request.url)
                return .refuse
            }
            inProgress += 1
            if held.contains(request.url) {
                waiting.append((request, sink))
                return .hold
            }
            return .pass
        }
        switch next {
        case .refuse:
            _ = sink.receive(head: ResponseHead(status: 503, headers: ["content-length": "0"]))
            sink.complete(error: nil)
        case .hold: break
        case .pass: origin.start(request, sink: Ending(sink) { self.lock.withLock { self.inProgress -= 1 } })
        }
    }

    func pauseBackground(_ paused: Bool) { origin.pauseBackground(paused) }
    func wake() { origin.wake() }
    func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        origin.probe(url: url, completion: completion)
    }

    /// Passes a response on, calling `ended` just before its end.
    private final class Ending: RangeResponseSink, @unchecked Sendable {
        // @unchecked Sendable: called in order from one thread, as any sink.
        let sink: RangeResponseSink
        let ended: () -> Void
        init(_ sink: RangeResponseSink, ended: @escaping () -> Void) {
            self.sink = sink
            self.ended = ended
        }
        func receive(head: ResponseHead) -> Bool { sink.receive(head: head) }
        func receive(body: UnsafeRawBufferPointer) -> Bool { sink.receive(body: body) }
        func complete(error: FetchError?) {
            ended()
            sink.complete(error: error)
        }
    }
}
