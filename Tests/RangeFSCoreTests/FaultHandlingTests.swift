import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Issue 3's semantics in the core, against an in-memory origin that misbehaves on request.
final class FaultHandlingTests: XCTestCase {
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 3_000_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var fileSystem: RangeFS!

    override func tearDown() {
        fileSystem = nil
        origin = nil
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "faults")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        var policy = FetchPolicy()
        policy.retryDelay = .milliseconds(10)
        fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, policy: policy)
    }

    /// Compares bytes without printing them.
    func assertBytes(_ result: Result<[UInt8], FileSystemError>, _ expected: ArraySlice<UInt8>,
                     _ message: String = "", line: UInt = #line) {
        switch result {
        case .success(let bytes):
            XCTAssertTrue(bytes.elementsEqual(expected), "\(bytes.count) bytes differ from the \(expected.count) expected \(message)", line: line)
        case .failure(let error):
            XCTFail("read failed: \(error) \(message)", line: line)
        }
    }

    var inode: UInt64 { fileSystem.catalog.item(named: "data.bin")!.inode }

    func open() throws -> OpenedFile { try fileSystem.open(inode).get() }

    func read(_ handle: UInt64, offset: Int, count: Int) -> Result<[UInt8], FileSystemError> {
        let result = fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: count)
        XCTAssertNotNil(result, "read never answered")
        return result ?? .failure(.io("no answer"))
    }

    func testADroppedConnectionResumesAtTheByteItBrokeAt() throws {
        origin.dropAfterBytes = 100_000  // mid-block: block 1 is half received
        origin.dropsLeft = 1
        let handle = try open().handle
        assertBytes(read(handle, offset: 0, count: 1_000_000), bytes[..<1_000_000])
        let ranges = origin.requests.compactMap(\.range)
        XCTAssertEqual(ranges.first?.lowerBound, 0)
        XCTAssertEqual(ranges.dropFirst().first?.lowerBound, 100_000, "the retry asks only for what did not arrive")
        XCTAssertLessThanOrEqual(origin.bodyBytesDelivered, UInt64(ranges.first!.count), "nothing fetched twice")
    }

    func testAServerThatIgnoresRangeIsStreamedWholeAndReadsGetTheirBytes() throws {
        origin.ignoresRange = true
        let handle = try open().handle
        assertBytes(read(handle, offset: 2_000_000, count: 50_000), bytes[2_000_000..<2_050_000])
        assertBytes(read(handle, offset: 10, count: 10), bytes[10..<20])
        let streams = origin.requests.filter { $0.range == nil }
        XCTAssertEqual(streams.count, 1, "one whole-file stream, not one per read")
    }

    func testALyingContentRangeIsAnErrorAndCachesNothing() throws {
        origin.contentRangeShift = 4096
        let handle = try open().handle
        guard case .failure(.io) = read(handle, offset: 65536, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().cachedBytes, 0)
        origin.contentRangeShift = 0
        assertBytes(read(handle, offset: 65536, count: 4096), bytes[65536..<69632], "recovers")
    }

    // Issue 38: `rclone serve s3` answers a Range GET with 200 and only the range, with its Content-Range. Read as
    // the whole file, every block fetch reported a change (its length is the range's) and readers got ESTALE.
    func testA200WithExactlyTheRangeAskedIsReadAsThatRange() throws {
        origin.answersRangesWith200 = true
        let handle = try open().handle
        assertBytes(read(handle, offset: 2_000_000, count: 50_000), bytes[2_000_000..<2_050_000])
        assertBytes(read(handle, offset: 10, count: 10), bytes[10..<20])
        assertBytes(read(handle, offset: 2_990_000, count: 20_000), bytes[2_990_000...], "up to the last byte")
        XCTAssertTrue(origin.requests.allSatisfy { $0.range != nil }, "no whole-file stream: the parts were taken")
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, 3_000_000)
        fileSystem.store.waitForWrites()
        XCTAssertGreaterThan(try fileSystem.attributes(of: inode).get().cachedBytes, 0, "the parts were cached")
    }

    /// A 200 that names other bytes than asked for is never read as them, nor as the whole file (a change): the
    /// read fails like one of a 206 with a wrong Content-Range, caching nothing, and the file stays as it was.
    func testA200WithAnotherContentRangeIsAnErrorAndCachesNothing() throws {
        origin.answersRangesWith200 = true
        origin.contentRangeShift = 4096
        let handle = try open().handle
        guard case .failure(.io) = read(handle, offset: 65536, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().cachedBytes, 0)
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, 3_000_000, "no change was read into it")
        origin.contentRangeShift = 0
        assertBytes(read(handle, offset: 65536, count: 4096), bytes[65536..<69632], "recovers, same handle")
    }

    /// Such a server ignores If-Range too: a part of another version (another ETag, same length) is a change,
    /// never bytes mixed into the cached version.
    func testA200PartOfAnotherVersionIsAChangeNotItsBytes() throws {
        origin.answersRangesWith200 = true
        let old = try open()
        assertBytes(read(old.handle, offset: 0, count: 100), bytes[..<100])
        let changed = pseudoRandomBytes(count: bytes.count, seed: 11)
        origin.serve(url, bytes: changed, etag: "\"v2\"")
        XCTAssertEqual(read(old.handle, offset: 1_000_000, count: 100), .failure(.stale))
        let new = try open()
        assertBytes(read(new.handle, offset: 1_000_000, count: 100), changed[1_000_000..<1_000_100])
    }

    /// A gateway that drops If-Range (an object store's If-Match) answers 206 with the new version's bytes: its own
    /// ETag says so, and the part is a change, never bytes mixed into the cached version.
    func testA206OfAnotherVersionFromAServerThatDropsIfRangeIsAChangeNotItsBytes() throws {
        origin.ignoresIfRange = true
        let old = try open()
        assertBytes(read(old.handle, offset: 0, count: 100), bytes[..<100])
        let changed = pseudoRandomBytes(count: bytes.count, seed: 13)
        origin.serve(url, bytes: changed, etag: "\"v2\"")
        XCTAssertEqual(read(old.handle, offset: 2_000_000, count: 100), .failure(.stale))
        let new = try open()
        assertBytes(read(new.handle, offset: 2_000_000, count: 100), changed[2_000_000..<2_000_100])
    }

    /// A cached weak ETag is never the condition sent (Last-Modified is): a 206 that carries a strong ETag then is
    /// the answer to that condition, not a sign that it was dropped, and its bytes are read.
    func testA206WithAStrongETagForAWeakCachedOneIsRead() throws {
        let weak = "http://origin/weak.bin"
        origin.serve(weak, bytes: bytes, etag: "W/\"w1\"")
        var policy = FetchPolicy()
        policy.retryDelay = .milliseconds(10)
        let other = try TemporaryDirectory(prefix: "faults-weak")
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [weak], directory: other.path, policy: policy)
        let handle = try fileSystem.open(fileSystem.catalog.item(named: "weak.bin")!.inode).get().handle
        let first = fileSystem.readSynchronously(handle: handle, offset: 0, count: 100)
        assertBytes(try XCTUnwrap(first), bytes[..<100])
        origin.serve(weak, bytes: bytes, etag: "\"w1\"")  // the same file; its range answers name a strong ETag
        let later = fileSystem.readSynchronously(handle: handle, offset: 2_000_000, count: 100)
        assertBytes(try XCTUnwrap(later), bytes[2_000_000..<2_000_100])
    }

    func testARemoteChangeGivesOldHandlesESTALEAndNewOpensTheNewVersion() throws {
        let old = try open()
        XCTAssertTrue(old.keepCache)
        assertBytes(read(old.handle, offset: 0, count: 100), bytes[..<100])
        let changed = pseudoRandomBytes(count: 2_500_000, seed: 7)
        origin.serve(url, bytes: changed, etag: "\"v2\"")

        XCTAssertEqual(read(old.handle, offset: 1_000_000, count: 100), .failure(.stale))
        XCTAssertEqual(read(old.handle, offset: 0, count: 100), .failure(.stale), "even cached bytes: no mix")
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, 2_500_000)
        let new = try open()
        XCTAssertFalse(new.keepCache, "the kernel must drop the old version's pages")
        assertBytes(read(new.handle, offset: 0, count: 100), changed[..<100])
        assertBytes(read(new.handle, offset: 2_400_000, count: 100_000), changed[2_400_000...])
    }

    func testAnUnreachableOriginFailsUncachedReadsButServesCachedOnes() throws {
        let handle = try open().handle
        assertBytes(read(handle, offset: 0, count: 4096), bytes[..<4096])
        origin.isDown = true
        guard case .failure(.io) = read(handle, offset: 1_500_000, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(try read(handle, offset: 0, count: 4096).get(), Array(bytes[..<4096]), "cached bytes still served")
        fileSystem.store.waitForWrites()
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().cachedBytes, 65536, "nothing deleted on failure")
        origin.isDown = false
        assertBytes(read(handle, offset: 1_500_000, count: 4096), bytes[1_500_000..<1_504_096], "works again, same handle")
    }

    // Issue 15: when a READ fails the kernel asks again at once, and that must not cost a second round of retries.
    func testTheKernelsRetryOfAFailedReadDoesNotStartASecondRoundOfRetries() throws {
        let handle = try open().handle
        origin.isDown = true
        var sent = origin.requests.count
        guard case .failure(.io) = read(handle, offset: 1_000_000, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(origin.requests.count - sent, FetchPolicy().attempts, "the first read gets every attempt")
        sent = origin.requests.count
        guard case .failure(.io) = read(handle, offset: 1_000_000, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(origin.requests.count - sent, 1, "asked again at once after a refusal: one attempt")

        origin.downError = .timedOut  // a server that accepts and never answers
        guard case .failure(.io) = read(handle, offset: 2_000_000, count: 4096) else { return XCTFail("expected EIO") }
        sent = origin.requests.count
        guard case .failure(.io) = read(handle, offset: 2_000_000, count: 4096) else { return XCTFail("expected EIO") }
        XCTAssertEqual(origin.requests.count - sent, 0, "asked again at once after a timeout: no second wait")

        origin.isDown = false
        assertBytes(read(handle, offset: 1_000_000, count: 4096), bytes[1_000_000..<1_004_096], "a server back answers at once")
        usleep(UInt32(CacheEntry.failureMemory.seconds * 1_000_000) + 100_000)
        assertBytes(read(handle, offset: 2_000_000, count: 4096), bytes[2_000_000..<2_004_096], "and after a timeout, soon")
    }
}
