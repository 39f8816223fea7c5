import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSSystem
import RangeFSPlatform
import RangeFSTestSupport
import XCTest

/// BlockSink's rules for what it takes of an answer (issue 39): the 200/206 rules of BlockSink+Head.swift and the
/// mirror failover of BlockSink.swift, each through a real cache entry and the real scheduler (the sink's owner),
/// over the in-memory origin whose knobs make each kind of answer. A reader of this process waits on the entry, as
/// a READ would, so every transfer is wanted to its end.
final class BlockSinkTests: XCTestCase {
    let url = "http://origin/file.bin"
    /// Ten blocks of 64 KiB, the last one short.
    let bytes = pseudoRandomBytes(count: 600_000, seed: 39)
    let logger = Logger(label: "test")
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var store: CacheStore!
    var scheduler: FetchScheduler!
    var entry: CacheEntry!
    /// How often the scheduler reported that the remote file changed (through `reports`, as to a file system).
    let changes = LockedBox(0)
    /// Where the scheduler reports, drained here as a file system drains it.
    let reports = EventQueue<EntryEvent>()
    /// Signalled when the drain reaches a marker (`changesSoFar`).
    let flushed = DispatchSemaphore(value: 0)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "blocksink")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes, etag: "\"v1\"")
        store = try CacheStore(root: directory.path, logger: logger)
        let metadata = RemoteMetadata(url: url, size: UInt64(bytes.count), etag: "\"v1\"",
                                      lastModified: origin.lastModified)
        entry = try store.entry(for: metadata, blockSize: 65536)
        entry.use.beginRead(pid: getpid())
        var policy = FetchPolicy()
        policy.retryDelay = .milliseconds(5)
        startThread(name: "test-reports") { [reports, changes, flushed] in
            while let event = reports.next() {
                switch event {
                case .remoteChanged: changes.withLock { $0 += 1 }
                case .completed: flushed.signal()  // the test's own marker: the scheduler never sends it
                case .reshaped: break
                }
            }
        }
        let events = FetchScheduler.Events(reports: reports)
        scheduler = FetchScheduler(fetcher: origin, policy: policy, events: events, logger: logger)
    }

    override func tearDown() {
        reports.close()
        entry?.use.endRead(pid: getpid())
        entry = nil
        scheduler = nil
        store = nil
        origin = nil
        directory = nil
        super.tearDown()
    }

    /// Asks for `blocks` as a reader does and waits for the answer (a generous deadline, for a hang only).
    func fetch(_ blocks: Range<Int>) throws -> Result<Void, FetchError> {
        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<Result<Void, BlockFailure>?>(nil)
        let availability = scheduler.ensure(entry, url: url, blocks: blocks) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        switch availability {
        case .ready: return .success(())
        case .failed(let failure): return .failure(FetchError(failure))
        case .waiting:
            XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "no answer for blocks \(blocks)")
            let result = try XCTUnwrap(answer.withLock { $0 })
            return result.mapError(FetchError.init)
        }
    }

    /// The bytes of `blocks` as the data file holds them once written.
    func cached(_ blocks: Range<Int>) throws -> [UInt8] {
        entry.waitForWrites()
        return try entry.readPresent(entry.byteRange(of: blocks))
    }

    func original(_ blocks: Range<Int>) -> [UInt8] {
        let range = entry.byteRange(of: blocks)
        return Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
    }

    /// How often the scheduler was told of a change, once `expected` were told or a generous deadline passed: the
    /// sink fails the readers first and tells its owner after.
    /// How often the scheduler reported a change until now: every report it sent before this call is counted.
    func changesSoFar() -> Int {
        reports.send(.completed(entry))
        XCTAssertEqual(flushed.wait(timeout: .now() + 60), .success, "the drain reached the marker (a hang only)")
        return changes.withLock { $0 }
    }

    func changesTold(expecting expected: Int) -> Int {
        let deadline = Date().addingTimeInterval(30)
        while changes.withLock({ $0 }) < expected && Date() < deadline { usleep(1000) }
        return changes.withLock { $0 }
    }

    /// The blocks in the cache once every block received so far is written: a reader is answered from memory
    /// before the writer marks its block present.
    var presentBlocks: [Int] {
        entry.waitForWrites()
        return (0..<entry.blockCount).filter { entry.isPresent($0) }
    }

    // MARK: 200 and 206

    func testA206WithTheExactContentRangeIsStored() throws {
        XCTAssertNoThrow(try fetch(2..<5).get())
        XCTAssertTrue(try cached(2..<5) == original(2..<5), "the bytes of the file")
        XCTAssertEqual(presentBlocks, [2, 3, 4], "only the blocks asked for")
        let requests = origin.requests
        XCTAssertEqual(requests.count, 1)
        XCTAssertEqual(requests.first?.range, entry.byteRange(of: 2..<5))
        XCTAssertEqual(requests.first?.ifRange, "\"v1\"", "every Range request carries If-Range")
        XCTAssertFalse(entry.isRangeless)
        XCTAssertEqual(changesSoFar(), 0)
    }

    /// A server that ignores Range answers with the whole file (same validator, same length): that 200 is taken,
    /// as one whole-file stream, not read as a change.
    func testA200WithTheWholeFileOfTheExpectedSizeIsTaken() throws {
        origin.ignoresRange = true
        XCTAssertNoThrow(try fetch(3..<4).get())
        XCTAssertTrue(entry.isRangeless)
        let deadline = Date().addingTimeInterval(60)
        while !entry.isComplete && Date() < deadline { usleep(5000) }
        XCTAssertTrue(entry.isComplete, "the stream brings every block")
        XCTAssertTrue(try cached(0..<entry.blockCount) == bytes, "the bytes of the file")
        XCTAssertEqual(origin.requests.last?.range, nil, "the stream asks without Range")
        XCTAssertEqual(changesSoFar(), 0, "the same validator and length: no change")
        XCTAssertFalse(entry.isStale)
    }

    /// The same ETag but another length, in a 200 to a partial request: the file changed.
    func testA200OfAnotherSizeToAPartialRequestIsARemoteChange() throws {
        origin.ignoresRange = true
        origin.serve(url, bytes: Array(bytes.prefix(500_000)), etag: "\"v1\"")
        XCTAssertEqual(try fetch(2..<4).failure, .remoteChanged)
        XCTAssertEqual(presentBlocks, [], "no byte of the other version is kept")
        XCTAssertFalse(entry.isRangeless, "a change is not a server that ignores Range")
        XCTAssertEqual(changesTold(expecting: 1), 1)
    }

    /// A 206 whose Content-Range names other bytes than those asked for: refused at its head, so none of its bytes
    /// reach a block, and no change of the file is read into it.
    func testA206WithAWrongContentRangeIsRefusedAndNothingOfItIsKept() throws {
        origin.contentRangeShift = 65536
        guard case .badContentRange = try fetch(2..<4).failure else {
            return XCTFail("a 206 for other bytes was not refused as a bad Content-Range")
        }
        XCTAssertEqual(presentBlocks, [])
        XCTAssertEqual(origin.requests.count, 1, "a wrong range is no transient failure: not asked again")
        XCTAssertEqual(origin.bodyBytesDelivered, 0, "refused at its head: no body byte was read")
        XCTAssertEqual(changesSoFar(), 0)
        // The same blocks come once the server answers right.
        origin.contentRangeShift = 0
        XCTAssertNoThrow(try fetch(2..<4).get())
        XCTAssertTrue(try cached(2..<4) == original(2..<4), "the bytes of the file")
    }

    /// Another ETag and Last-Modified: the server answers If-Range with the whole new file, a change.
    func testAChangedValidatorIsARemoteChange() throws {
        origin.serve(url, bytes: pseudoRandomBytes(count: bytes.count, seed: 40), etag: "\"v2\"")
        origin.lastModified = "Mon, 23 Nov 2026 10:00:00 GMT"
        XCTAssertEqual(try fetch(5..<7).failure, .remoteChanged)
        XCTAssertEqual(presentBlocks, [])
        XCTAssertEqual(changesTold(expecting: 1), 1)
        XCTAssertEqual(origin.requests.first?.ifRange, "\"v1\"")
    }

    /// A server that ignores If-Range and sends the range with 200 (rclone serve s3): its part of another version
    /// (another ETag and Last-Modified) is no byte of the file.
    func testA200PartOfAnotherVersionIsARemoteChange() throws {
        origin.answersRangesWith200 = true
        XCTAssertNoThrow(try fetch(0..<2).get(), "a 200 part of the cached version is taken")
        XCTAssertTrue(try cached(0..<2) == original(0..<2), "the bytes of the file")
        origin.serve(url, bytes: pseudoRandomBytes(count: bytes.count, seed: 41), etag: "\"v2\"")
        origin.lastModified = "Mon, 23 Nov 2026 10:00:00 GMT"
        XCTAssertEqual(try fetch(4..<6).failure, .remoteChanged)
        XCTAssertEqual(presentBlocks, [0, 1], "none of the other version's part")
        XCTAssertEqual(changesTold(expecting: 1), 1)
    }

    /// Makes the entry anew for `etag` and `lastModified` (the server's, which the origin then sends).
    func reopen(etag: String, lastModified: String) throws {
        entry.use.endRead(pid: getpid())
        origin.serve(url, bytes: bytes, etag: etag)
        origin.lastModified = lastModified
        let metadata = RemoteMetadata(url: url, size: UInt64(bytes.count), etag: etag, lastModified: lastModified)
        store = try CacheStore(root: directory.path + "/other", logger: logger)
        entry = try store.entry(for: metadata, blockSize: 65536)
        entry.use.beginRead(pid: getpid())
    }

    /// Issue 45, case 1: a weak ETag and no date give nothing to send as If-Range, so the 206s answered no
    /// condition: another weak ETag on one of them is a change, and none of its bytes is kept.
    func testA206WithAnotherWeakETagIsARemoteChange() throws {
        try reopen(etag: "W/\"v1\"", lastModified: "")
        XCTAssertNoThrow(try fetch(0..<2).get())
        XCTAssertNil(origin.requests.first?.ifRange, "a weak ETag conditions nothing")
        origin.serve(url, bytes: pseudoRandomBytes(count: bytes.count, seed: 45), etag: "W/\"v2\"")
        XCTAssertEqual(try fetch(4..<6).failure, .remoteChanged)
        XCTAssertEqual(presentBlocks, [0, 1], "none of the other version's bytes")
        XCTAssertEqual(changesTold(expecting: 1), 1)
    }

    /// A 206 that answered its If-Range (a date) but states another Last-Modified than the cached version's: the
    /// server did not honour the condition, and its bytes are another version's.
    func testA206WithAnotherDateIsARemoteChange() throws {
        try reopen(etag: "", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        origin.ignoresIfRange = true
        XCTAssertNoThrow(try fetch(0..<1).get())
        origin.lastModified = "Mon, 23 Nov 2026 10:00:00 GMT"
        XCTAssertEqual(try fetch(3..<4).failure, .remoteChanged)
        XCTAssertEqual(presentBlocks, [0])
    }

    /// Issue 45, case 2: a 206 `multipart/byteranges` whose top-level Content-Range and length match the request
    /// is refused at its head, like a wrong encoding: no byte of it is kept.
    func testAMultipartAnswerIsRefusedWhole() throws {
        origin.extraHeaders = ["content-type": "multipart/byteranges; boundary=XYZ"]
        guard case .untrustedBody(let reason) = try fetch(1..<3).failure else {
            return XCTFail("a multipart answer was not refused")
        }
        XCTAssertTrue(reason.contains("multipart"), reason)
        XCTAssertEqual(presentBlocks, [])
        XCTAssertEqual(changesSoFar(), 0, "no change of the file")
    }

    // MARK: Mirrors

    /// A transfer cut mid-block on one mirror goes on at once from the byte it reached on the other: each byte is
    /// sent once, and the mirror that failed is set aside.
    func testAFailureOnOneMirrorGoesOnFromTheByteReachedOnAnother() throws {
        let mirror = "http://mirror/file.bin"
        origin.serve(mirror, bytes: bytes, etag: "\"m1\"")
        scheduler.useMirrors([mirror], for: entry.remoteMetadata)
        let mirrors = try XCTUnwrap(scheduler.mirrors.mirrors(of: url))
        let deadline = Date().addingTimeInterval(30)
        while mirrors.snapshot[1].validator == nil && Date() < deadline { usleep(1000) }
        XCTAssertEqual(mirrors.snapshot[1].validator, "\"m1\"", "the mirror's probe taught its validator")
        origin.dropAfterBytes = 100_000  // one block and 34,464 bytes of the next
        origin.dropsLeft = 1
        XCTAssertNoThrow(try fetch(0..<8).get())
        XCTAssertTrue(try cached(0..<8) == original(0..<8), "the bytes of the file")
        let requests = origin.requests
        guard requests.count == 2 else { return XCTFail("not the two requests expected: \(requests)") }
        XCTAssertEqual(requests[0].range, entry.byteRange(of: 0..<8))
        XCTAssertEqual(requests[1].range, 100_000..<entry.byteRange(of: 0..<8).upperBound, "from the byte reached")
        XCTAssertNotEqual(requests[1].url, requests[0].url, "on the other mirror")
        for request in requests {
            XCTAssertEqual(request.ifRange, request.url == url ? "\"v1\"" : "\"m1\"", "each its own validator")
        }
        XCTAssertEqual(origin.bodyBytesDelivered, entry.byteRange(of: 0..<8).upperBound, "no byte sent twice")
        let failed = requests[0].url == url ? 0 : 1
        guard case .setAside = mirrors.snapshot[failed].condition else {
            return XCTFail("the mirror that failed is not set aside: \(mirrors.snapshot[failed].condition)")
        }
        XCTAssertEqual(changesSoFar(), 0)
    }

    /// Issue 39: a transfer is handed its engines at its birth and sends each attempt through the one of its
    /// priority: a reader's blocks go to the demand engine, readahead to the background one (the scheduler no longer
    /// sends a sink's requests for it).
    func testEachTransferSendsThroughTheEngineOfItsPriority() throws {
        let demand = MemoryOrigin()
        demand.serve(url, bytes: bytes, etag: "\"v1\"")
        let background = FetchScheduler(fetcher: origin, demandFetcher: demand, policy: FetchPolicy(), logger: logger)
        scheduler = background
        if case .failure(let error) = try fetch(0..<2) { XCTFail("the reader's blocks failed: \(error)") }
        XCTAssertEqual(demand.requests.count, 1, "the reader's blocks from the demand engine")
        XCTAssertEqual(origin.requests.count, 0)
        background.prefetch(entry, url: url, blocks: 6..<8, priority: .readahead)
        let deadline = Date().addingTimeInterval(60)
        while !(entry.isPresent(6) && entry.isPresent(7)) && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(entry.isPresent(7))
        XCTAssertEqual(origin.requests.count, 1, "readahead from the background engine")
        XCTAssertEqual(demand.requests.count, 1)
    }
}

private extension Result {
    /// The error of a failure, nil for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
