import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import RangeFSTestSupport
import Synchronization
import XCTest

/// Background fill, connection caps and bandwidth limits, against an in-memory origin.
final class FetchSchedulerTests: XCTestCase {
    let url = "http://origin/fill.bin"
    let bytes = pseudoRandomBytes(count: 12 << 20, seed: 5)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "scheduler")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
    }

    override func tearDown() {
        directory = nil
        origin = nil
        super.tearDown()
    }

    func makeFileSystem(prefetch: PrefetchPolicy, policy: FetchPolicy = FetchPolicy()) throws -> RangeFS {
        try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, policy: policy, prefetch: prefetch)
    }

    func cachedBytes(_ fileSystem: RangeFS) throws -> UInt64 {
        try fileSystem.attributes(of: try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin")).inode).get().cachedBytes
    }

    func waitUntil(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(10_000)
        }
        return try condition()
    }

    func testPrefetchOpenCompletesAFileAfterItIsOpenedAndClosed() throws {
        let fileSystem = try makeFileSystem(prefetch: .open)
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin")).inode
        let handle = try fileSystem.open(inode).get().handle
        fileSystem.release(handle)
        XCTAssertTrue(try waitUntil(10) { try cachedBytes(fileSystem) == UInt64(bytes.count) })
        XCTAssertEqual(origin.bytesSent, UInt64(bytes.count), "each byte fetched once")
        XCTAssertEqual(fileSystem.scheduler.load.running, 0)
    }

    func testPrefetchNoneFetchesNothingUnread() throws {
        let fileSystem = try makeFileSystem(prefetch: .none)
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin")).inode
        _ = try fileSystem.open(inode).get()
        usleep(300_000)
        XCTAssertEqual(origin.requests.count, 0)
    }

    func testPrefetchAllFillsEveryFileWithoutAnOpen() throws {
        let fileSystem = try makeFileSystem(prefetch: .all)
        fileSystem.fillAll()
        XCTAssertTrue(try waitUntil(10) { try cachedBytes(fileSystem) == UInt64(bytes.count) })
    }

    func testFillRespectsThePerFileConnectionCapAndTheBandwidthLimit() throws {
        origin.latency = 0.05
        var policy = FetchPolicy()
        policy.segmentBytes = 512 << 10
        policy.connectionsPerFile = 3
        policy.fillTransfers = 8
        policy.fillBytesPerSecond = 8 << 20
        let fileSystem = try makeFileSystem(prefetch: .all, policy: policy)
        fileSystem.fillAll()
        XCTAssertTrue(try waitUntil(10) { try cachedBytes(fileSystem) == UInt64(bytes.count) })
        XCTAssertLessThanOrEqual(origin.peakConcurrency, 3)
        XCTAssertGreaterThanOrEqual(origin.peakConcurrency, 2, "fill should use parallel connections")
        XCTAssertTrue(origin.requests.allSatisfy { $0.maxBytesPerSecond == (8 << 20) / 8 }, "fill is rate-capped")
    }

    func testFillStartsNothingWhileReadaheadRuns() throws {
        origin.latency = 2
        var policy = FetchPolicy()
        policy.segmentBytes = 1 << 20
        policy.fillBytesPerSecond = 1 << 30  // marks fill's requests: only they carry a rate
        let fileSystem = try makeFileSystem(prefetch: .none, policy: policy)
        let item = try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin"))
        let entry = try fileSystem.entry(for: item)
        // A sequential reader's readahead for the first 2 MiB, then the whole file as background fill.
        let ahead = entry.claim(blocks: entry.blocks(covering: 0..<(2 << 20)))
        fileSystem.scheduler.fetch(entry, url: url, runs: ahead, priority: .readahead)
        fileSystem.scheduler.fill(entry, url: url)
        // The readahead answers after 2 s: its two requests are seen well before, and nothing else is asked.
        XCTAssertTrue(waitUntil(10) { origin.requests.count >= 2 })
        XCTAssertEqual(origin.requests.count, 2, "the readahead's two requests")
        XCTAssertFalse(origin.requests.contains { $0.maxBytesPerSecond != nil }, "no fill while readahead runs")
        XCTAssertTrue(try waitUntil(60) { try cachedBytes(fileSystem) == UInt64(bytes.count) }, "fill takes over")
        XCTAssertTrue(origin.requests.contains { $0.maxBytesPerSecond != nil })
        XCTAssertEqual(origin.bytesSent, UInt64(bytes.count), "each byte fetched once")
    }

    func testADemandReadPausesBackgroundFillUntilItIsAnswered() throws {
        origin.chunkSize = 4096
        // About 2 MiB/s per transfer: the fill is still running when the read comes (at memory speed it had
        // sometimes fetched the whole file first, and nothing was left to pause for).
        origin.chunkDelay = 0.002
        var policy = FetchPolicy()
        policy.segmentBytes = 2 << 20
        let fileSystem = try makeFileSystem(prefetch: .all, policy: policy)
        fileSystem.fillAll()
        XCTAssertTrue(waitUntil(60) { origin.requests.count > 0 })
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin")).inode
        let handle = try fileSystem.open(inode).get().handle
        let done = DispatchSemaphore(value: 0)
        fileSystem.read(handle: handle, offset: 11 << 20, count: 4096) { _ in done.signal() }
        // A deadline for a hang only: on a loaded machine the read took more than 5 s.
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        XCTAssertGreaterThanOrEqual(origin.backgroundPauses, 1, "fill must pause while a reader waits")
        XCTAssertTrue(try waitUntil(20) { try cachedBytes(fileSystem) == UInt64(bytes.count) }, "and resume after")
    }

    /// Issue 39: a demand read takes the scheduler's lock once. Its blocks that nobody fetches are queued and the
    /// requests that hold its other blocks promoted in the same round trip (it was two: fetch, then promote). The
    /// origin holds every request unanswered while the locks are counted, so no transfer ends meanwhile.
    func testADemandReadTakesTheSchedulersLockOnce() throws {
        let taken = Mutex(0)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                                                schedulerLockTaken: { taken.withLock { $0 += 1 } })
        let lockCount = { taken.withLock { $0 } }
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "fill.bin")).inode
        let handle = try fileSystem.open(inode).get().handle
        defer { fileSystem.release(handle) }
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        origin.hang(host: "origin")
        let scheduler = fileSystem.scheduler
        let answered = DispatchSemaphore(value: 0)
        let failures = Mutex<[String]>([])
        var waiting = 0
        for (blocks, what) in [(0..<2, "nothing fetched yet"), (1..<4, "block 1 in flight, 2 and 3 not"),
                               (0..<4, "every block in flight")] {
            let before = lockCount()
            let availability = scheduler.ensure(entry, url: url, blocks: blocks) { result in
                if case .failure(let failure) = result { failures.withLock { $0.append("\(what): \(failure)") } }
                answered.signal()
            }
            XCTAssertEqual(lockCount() - before, 1, what)
            guard case .waiting = availability else { return XCTFail("\(what): \(availability)") }
            waiting += 1
        }
        origin.release(host: "origin")
        for _ in 0..<waiting { XCTAssertEqual(answered.wait(timeout: .now() + 120), .success) }
        XCTAssertEqual(failures.withLock { $0 }, [], "every waiting read is answered once the origin answers")
    }

    /// A mount with `--cache-max-size` of `maxBytes` and `--prefetch all`.
    func makeCappedFileSystem(maxBytes: Int) throws -> RangeFS {
        var settings = StoreSettings()
        settings.maxBytes = maxBytes
        return try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, prefetch: .all,
                                      storeSettings: settings)
    }

    // Issue 45: fill of a 12 MiB file through an 8 MiB cap used to fetch, evict and fetch again for ever. It does
    // not start: the file is read through, and says so.
    func testFillDoesNotStartForAFileLargerThanTheCacheCap() throws {
        let fileSystem = try makeCappedFileSystem(maxBytes: 8 << 20)
        fileSystem.fillAll()
        XCTAssertFalse(waitUntil(2) { origin.bytesSent > 0 }, "the origin sent \(origin.bytesSent) bytes")
        XCTAssertEqual(fileSystem.scheduler.load.filling, 0, "no fill job is left waiting")
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        XCTAssertEqual(entry.fillRefusal, .largerThanCache(cap: 8 << 20, pinned: 0))
    }

    // The same file through a 16 MiB cap fits: it is completed, each byte fetched once.
    func testFillCompletesAFileThatFitsTheCacheCap() throws {
        let fileSystem = try makeCappedFileSystem(maxBytes: 16 << 20)
        fileSystem.fillAll()
        XCTAssertTrue(try waitUntil(10) { try cachedBytes(fileSystem) == UInt64(bytes.count) })
        XCTAssertEqual(origin.bytesSent, UInt64(bytes.count))
    }
}
