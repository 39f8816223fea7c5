import Dispatch
import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Issue 28's mirrors in the core: which mirror a request asks, and what a failure does, without sockets.
final class MirrorSetTests: XCTestCase {
    final class Clock: @unchecked Sendable {
        var now = 1000.0
    }

    func makeSet(_ count: Int, clock: Clock = Clock()) -> MirrorSet {
        MirrorSet(urls: (0..<count).map { "http://m\($0)/f" }, clock: { clock.now })
    }

    func testEveryUnmeasuredMirrorIsTriedBeforeAnyGetsASecondRequest() {
        let mirrors = makeSet(3)
        let chosen = (0..<3).map { _ in mirrors.choose().index }
        XCTAssertEqual(Set(chosen), [0, 1, 2])
    }

    func testLoadFollowsMeasuredSpeed() {
        let mirrors = makeSet(2)
        // Mirror 0 measured at 30 MB/s per request, mirror 1 at 10 MB/s.
        mirrors.finished(mirrors.choose(), bytes: 30 << 20, seconds: 1, error: nil)
        mirrors.finished(mirrors.choose(), bytes: 10 << 20, seconds: 1, error: nil)
        let running = (0..<8).map { _ in mirrors.choose().index }
        XCTAssertEqual(running.filter { $0 == 0 }.count, 6, "\(running)")
        XCTAssertEqual(running.filter { $0 == 1 }.count, 2, "\(running)")
    }

    func testAFailedMirrorIsSetAsideWithAGrowingBackoffAndComesBack() {
        let clock = Clock()
        let mirrors = makeSet(2, clock: clock)
        let first = mirrors.choose()
        mirrors.finished(first, bytes: 0, seconds: 0.1, error: .connectionRefused)
        mirrors.setAside(first, because: .connectionRefused)
        XCTAssertTrue(mirrors.hasUsableMirror)
        XCTAssertEqual((0..<5).map { _ in mirrors.choose().index }, Array(repeating: 1 - first.index, count: 5))
        clock.now += 2.1
        XCTAssertEqual(mirrors.snapshot[first.index].condition, .setAside(until: 1002))
        _ = mirrors.choose()  // its backoff ended: usable again
        XCTAssertEqual(mirrors.snapshot[first.index].condition, .usable)
        mirrors.setAside(first, because: .timedOut)  // a second failure in a row: 4 s
        XCTAssertEqual(mirrors.snapshot[first.index].condition, .setAside(until: clock.now + 4))
        XCTAssertEqual(mirrors.snapshot[first.index].lastError, FetchError.timedOut.userMessage)
    }

    func testAMirrorBackFromItsBackoffGetsOneRequestUntilOneSucceeds() {
        let clock = Clock()
        let mirrors = makeSet(2, clock: clock)
        // Both measured alike, then mirror 1 stalls and is set aside.
        mirrors.finished(mirrors.choose(), bytes: 8 << 20, seconds: 1, error: nil)
        mirrors.finished(mirrors.choose(), bytes: 8 << 20, seconds: 1, error: nil)
        let stalled = MirrorSet.Choice(index: 1, url: "http://m1/f", validator: nil)
        mirrors.setAside(stalled, because: .stalled(3))
        XCTAssertEqual(mirrors.choose().index, 0, "set aside")
        clock.now += 2.1
        // Back: of eight requests started now, it gets one (it may still be dead), not its half.
        let chosen = (0..<8).map { _ in mirrors.choose() }
        XCTAssertEqual(chosen.filter { $0.index == 1 }.count, 1, "\(chosen.map(\.index))")
        // Once that one succeeds, it gets its share again.
        mirrors.finished(chosen.first { $0.index == 1 }!, bytes: 8 << 20, seconds: 1, error: nil)
        for choice in chosen where choice.index == 0 { mirrors.finished(choice, bytes: 8 << 20, seconds: 1, error: nil) }
        let after = (0..<8).map { _ in mirrors.choose().index }
        XCTAssertEqual(after.filter { $0 == 1 }.count, 4, "\(after)")
    }

    func testWhenEveryMirrorIsSetAsideTheOneBackFirstIsAsked() {
        let clock = Clock()
        let mirrors = makeSet(2, clock: clock)
        let first = mirrors.choose()
        mirrors.setAside(first, because: .connectionRefused)
        clock.now += 1
        let second = mirrors.choose()
        mirrors.setAside(second, because: .connectionRefused)
        XCTAssertFalse(mirrors.hasUsableMirror)
        XCTAssertEqual(mirrors.choose().index, first.index, "the first one set aside is back first")
    }

    func testAMirrorOfAnotherLengthIsDroppedButThePrimaryNeverIs() {
        let mirrors = makeSet(3)
        XCTAssertFalse(mirrors.learn(2, size: 999, expected: 1000, validator: "\"x\""))
        XCTAssertTrue(mirrors.learn(1, size: 1000, expected: 1000, validator: "\"b\""))
        XCTAssertEqual(mirrors.snapshot[2].condition, .dropped)
        XCTAssertEqual(mirrors.snapshot[1].validator, "\"b\"")
        mirrors.drop(MirrorSet.Choice(index: 0, url: "http://m0/f", validator: nil), reason: "no")
        XCTAssertEqual(mirrors.snapshot[0].condition, .usable)
        XCTAssertFalse((0..<10).map { _ in mirrors.choose().index }.contains(2))
    }
}

/// Mirrors through the scheduler and the cache, over an in-memory origin.
final class MirrorFetchTests: XCTestCase {
    let primary = "http://a/data.bin"
    let mirror = "http://b/data.bin"
    let bytes = pseudoRandomBytes(count: 3_000_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var fileSystem: RangeFS!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "mirrors")
        origin = MemoryOrigin()
        origin.serve(primary, bytes: bytes, etag: "\"a1\"")
        origin.serve(mirror, bytes: bytes, etag: "\"b1\"")
        var policy = FetchPolicy()
        policy.retryDelay = .milliseconds(10)
        fileSystem = try makeTestFileSystem(origin: origin, urls: [primary], directory: directory.path, policy: policy)
        fileSystem.configure(fileSystem.catalog.item(named: "data.bin")!.metadata, mirrors: [mirror])
        let deadline = Date().addingTimeInterval(5)
        while fileSystem.scheduler.mirrors.mirrors(of: primary)?.snapshot[1].validator == nil && Date() < deadline {
            usleep(1000)
        }
    }

    override func tearDown() {
        fileSystem = nil
        origin = nil
        directory = nil
        super.tearDown()
    }

    func read(offset: Int, count: Int) throws -> Result<[UInt8], FileSystemError> {
        let inode = fileSystem.catalog.item(named: "data.bin")!.inode
        let handle = try fileSystem.open(inode).get().handle
        return try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: count))
    }

    func testEachMirrorGetsItsOwnValidatorAndACutRequestGoesOnFromItsByteOnTheOther() throws {
        origin.dropAfterBytes = 100_000
        origin.dropsLeft = 1
        XCTAssertEqual(try read(offset: 0, count: 1_000_000).get(), Array(bytes[..<1_000_000]))
        let requests = origin.requests
        XCTAssertGreaterThanOrEqual(requests.count, 2)
        XCTAssertNotEqual(requests[1].url, requests[0].url, "the rest was asked of the other mirror")
        XCTAssertEqual(requests[1].range?.lowerBound, 100_000, "from the byte where the first broke")
        for request in requests {
            XCTAssertEqual(request.ifRange, request.url == primary ? "\"a1\"" : "\"b1\"", "\(request)")
        }
    }

    func testARequestMayStallOnlyBrieflyWhereAnotherMirrorCanTakeOver() throws {
        XCTAssertEqual(try read(offset: 0, count: 1_000_000).get(), Array(bytes[..<1_000_000]))
        XCTAssertFalse(origin.requests.isEmpty)
        for request in origin.requests {
            XCTAssertEqual(request.stallTimeout, FetchPolicy().mirrorStallTime, "another mirror could take over: \(request)")
        }
        // With the other mirror set aside, nothing could take over: only the low-speed timeout applies.
        fileSystem.scheduler.mirrors.mirrors(of: primary)!
            .setAside(MirrorSet.Choice(index: 1, url: mirror, validator: nil), because: .stalled(3))
        let before = origin.requests.count
        XCTAssertEqual(try read(offset: 2_000_000, count: 100_000).get(), Array(bytes[2_000_000..<2_100_000]))
        let later = origin.requests.dropFirst(before)
        XCTAssertFalse(later.isEmpty)
        for request in later {
            XCTAssertEqual(request.url, primary)
            XCTAssertNil(request.stallTimeout, "\(request)")
        }
        // A fill capped at 64 KiB/s reads 256 KiB at a time: its gaps of seconds are no stall.
        XCTAssertEqual(FetchPolicy().mirrorStallTime(cappedAt: 64 << 10), 16)
        XCTAssertEqual(FetchPolicy().mirrorStallTime(cappedAt: 100 << 20), FetchPolicy().mirrorStallTime)
    }

    func testAReaderSeesAnErrorOnlyWhenEveryMirrorFailed() throws {
        origin.remove(primary)
        XCTAssertEqual(try read(offset: 0, count: 500_000).get(), Array(bytes[..<500_000]))
        origin.remove(mirror)
        guard case .failure = try read(offset: 2_000_000, count: 100_000) else {
            return XCTFail("a read with every mirror gone succeeded")
        }
    }

    /// Issue 38: a mirror that answers a Range GET with 200 and only the range (`rclone serve s3`) serves its parts;
    /// as it ignores If-Range, a part of another version of it (another ETag) is no byte of the file.
    func testAMirrorThatAnswersRangesWith200ServesItsPartsButNoneOfAnotherVersion() throws {
        origin.answersRangesWith200 = true
        origin.remove(primary)  // every part comes from the mirror
        XCTAssertEqual(try read(offset: 0, count: 500_000).get(), Array(bytes[..<500_000]))
        origin.serve(mirror, bytes: pseudoRandomBytes(count: bytes.count, seed: 5), etag: "\"b2\"")
        guard case .failure = try read(offset: 2_000_000, count: 100_000) else {
            return XCTFail("the mirror's other version was served as the file")
        }
    }

    func testAMirrorThatIgnoresRangeIsDroppedAndTheFileIsNotMadeRangeless() throws {
        // The mirror's server answers 200 with the whole body to a ranged request (same validator).
        origin.ignoresRange = true
        let result = try read(offset: 0, count: 200_000)
        origin.ignoresRange = false
        if case .success(let got) = result { XCTAssertEqual(got, Array(bytes[..<200_000])) }
        XCTAssertEqual(try read(offset: 1_000_000, count: 200_000).get(), Array(bytes[1_000_000..<1_200_000]))
        let states = fileSystem.mirrorStatus(of: primary)?.map(\.state) ?? []
        XCTAssertEqual(states[1], "dropped", "\(states)")
    }

    func testLinkDuplicatesAreParsed() {
        let found = ProbedMetadata.duplicates(
            inLink: "<http://m1/f.iso>; rel=duplicate; pri=1, </other/f.iso>; rel=\"duplicate\", <http://x/>; rel=describedby",
            base: "http://origin/dir/f.iso")
        XCTAssertEqual(found, ["http://m1/f.iso", "http://origin/other/f.iso"])
    }
}

/// Mirrors of a library: 10,000 files with a mirror each must not start 10,000 probes at once.
final class MirrorProbeWindowTests: XCTestCase {
    /// Answers probes after a delay, counting how many are in flight at once.
    final class SlowProbes: RangeFetching, @unchecked Sendable {
        private let lock = NSLock()
        private var inFlight = 0
        private(set) var peak = 0
        private(set) var answered = 0

        func start(_ request: RangeRequest, sink: RangeResponseSink) { sink.complete(error: .cancelled) }
        func pauseBackground(_ paused: Bool) {}
        func wake() {}
        func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
            lock.withLock {
                inFlight += 1
                peak = max(peak, inFlight)
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.005) { [self] in
                lock.withLock {
                    inFlight -= 1
                    answered += 1
                }
                completion(.success(RemoteMetadata(url: url, size: 1000, etag: "\"m\"", lastModified: "")))
            }
        }
    }

    func testMirrorProbesRunAtMost64AtATime() {
        let probes = SlowProbes()
        let scheduler = FetchScheduler(fetcher: probes, logger: Logger(label: "test"))
        let files = 1_000
        for index in 0..<files {
            scheduler.useMirrors(["http://m/\(index)"],
                                 for: RemoteMetadata(url: "http://o/\(index)", size: 1000, etag: "\"o\"", lastModified: ""))
        }
        let deadline = Date().addingTimeInterval(20)
        while probes.answered < files && Date() < deadline { usleep(5000) }
        XCTAssertEqual(probes.answered, files)
        XCTAssertLessThanOrEqual(probes.peak, 64)
        XCTAssertEqual(scheduler.mirrors.mirrors(of: "http://o/999")?.snapshot[1].validator, "\"m\"")
    }
}
