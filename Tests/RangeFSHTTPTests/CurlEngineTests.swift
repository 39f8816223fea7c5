import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
import RangeFSHTTP
import RangeFSTestSupport
import XCTest

/// Collects one transfer's response for assertions.
final class CollectingSink: RangeResponseSink, @unchecked Sendable {
    private let lock = NSLock()
    private(set) var head: ResponseHead?
    private(set) var body: [UInt8] = []
    private(set) var error: FetchError?
    let done = DispatchSemaphore(value: 0)

    func receive(head: ResponseHead) -> Bool {
        lock.withLock { self.head = head }
        return true
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        lock.withLock { self.body.append(contentsOf: body) }
        return true
    }

    func complete(error: FetchError?) {
        lock.withLock { self.error = error }
        done.signal()
    }
}

final class CurlEngineTests: XCTestCase {
    static var origin: NginxOrigin!
    static var engine: CurlEngine!
    static let content = pseudoRandomBytes(count: 3_000_000)

    override class func setUp() {
        origin = try! NginxOrigin()
        try! origin.serve("file.bin", bytes: content)
        engine = CurlEngine(logger: Logger(label: "test"))
    }

    override class func tearDown() {
        engine.shutdown()
        origin.stop()
    }

    func probe(_ url: String) -> Result<RemoteMetadata, FetchError> {
        Self.engine.probeAll([url])[0]
    }

    func testProbeReportsSizeValidatorsAndName() throws {
        let metadata = try probe(Self.origin.url("file.bin")).get()
        XCTAssertEqual(metadata.size, 3_000_000)
        XCTAssertTrue(metadata.etag.hasPrefix("\""), metadata.etag)
        XCTAssertNotNil(metadata.modificationTime)
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata), "file.bin")
    }

    func testProbeErrorsNameTheirCause() {
        XCTAssertEqual(probe(Self.origin.url("missing.bin")), .failure(.httpStatus(404)))
        XCTAssertEqual(probe("http://127.0.0.1:1/x"), .failure(.connectionRefused))
        XCTAssertEqual(probe("ftp://host/x"), .failure(.unsupportedScheme("ftp")))
        guard case .failure(.malformedURL) = probe("http://exa mple.com/x") else { return XCTFail("spaces in the host") }
        guard case .failure(.malformedURL) = probe("just-words") else { return XCTFail("no scheme") }
    }

    func testCharactersThatNeedEncodingGetTheEncodingToUse() {
        XCTAssertEqual(probe("http://h/my file.bin"), .failure(.needsPercentEncoding(character: "a raw space", encoded: "%20")))
        XCTAssertEqual(probe("http://h/a\tb"), .failure(.needsPercentEncoding(character: "a control character", encoded: "%09")))
        XCTAssertTrue(FetchError.needsPercentEncoding(character: "a raw space", encoded: "%20").userMessage
            .contains("percent-encode it as %20"))
        guard case .failure(.malformedURL) = probe("http://exa mple.com/x") else { return XCTFail("spaces in the host") }
    }

    func testRangedGetReturnsExactlyTheRangeWithoutAcceptRanges() {
        let sink = CollectingSink()
        let request = RangeRequest(url: Self.origin.url("file.bin"), range: 1_000_000..<1_500_000, ifRange: nil)
        Self.engine.start(request, sink: sink)
        XCTAssertEqual(sink.done.wait(timeout: .now() + 10), .success)
        XCTAssertNil(sink.error)
        XCTAssertEqual(sink.head?.status, 206)
        XCTAssertEqual(sink.head?["content-range"], "bytes 1000000-1499999/3000000")
        XCTAssertNil(sink.head?["accept-ranges"], "stock nginx leaves Accept-Ranges out of a 206")
        XCTAssertEqual(sink.body, Array(Self.content[1_000_000..<1_500_000]))
        XCTAssertEqual(Self.origin.accessLog().last?.range, "bytes=1000000-1499999")
    }

    func testIfRangeMismatchGetsTheWholeFileAs200() {
        let sink = CollectingSink()
        let request = RangeRequest(url: Self.origin.url("file.bin"), range: 0..<10, ifRange: "\"stale-etag\"")
        Self.engine.start(request, sink: sink)
        XCTAssertEqual(sink.done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(sink.head?.status, 200)
    }

    // A request with a stall timeout (one mirror of several) is given up once its server sends nothing for that
    // long; one without keeps waiting (the 20 s low-speed timeout), and a transfer paused by rangefs is no stall.
    func testARequestWithAStallTimeoutIsGivenUpWhenItsServerFallsSilent() throws {
        let origin = try FaultOrigin()
        defer { origin.stop() }
        origin.serve("silent.bin", bytes: Self.content, etag: "\"s1\"")
        origin.setFault(.stall, for: "silent.bin")
        var request = RangeRequest(url: origin.url("silent.bin"), range: 0..<1_000_000, ifRange: nil)
        request.stallTimeout = 1
        let watched = CollectingSink()
        let started = Date()
        Self.engine.start(request, sink: watched)
        request.stallTimeout = nil
        let unwatched = CollectingSink()
        Self.engine.start(request, sink: unwatched)
        XCTAssertEqual(watched.done.wait(timeout: .now() + 5), .success, "the stalled request was not given up")
        XCTAssertEqual(watched.error, .stalled(1))
        XCTAssertLessThan(Date().timeIntervalSince(started), 3.5)
        XCTAssertEqual(unwatched.done.wait(timeout: .now() + 1), .timedOut, "without a stall timeout it waits on")
        // The origin gives up on its side (it closes the connection unanswered): the request ends as a cut one.
        origin.setFault(.none, for: "silent.bin")
        XCTAssertEqual(unwatched.done.wait(timeout: .now() + 10), .success)
        XCTAssertNotNil(unwatched.error)
        XCTAssertNotEqual(unwatched.error, .stalled(1))
    }

    func testATransferPausedForReadersIsNoStall() {
        let engine = CurlEngine(logger: Logger(label: "test"))
        defer { engine.shutdown() }
        engine.pauseBackground(true)
        var request = RangeRequest(url: Self.origin.url("file.bin"), range: 0..<3_000_000, ifRange: nil)
        request.stallTimeout = 1
        let sink = BackgroundSink()
        engine.start(request, sink: sink)
        XCTAssertEqual(sink.done.wait(timeout: .now() + 3), .timedOut, "a paused background transfer finished")
        engine.pauseBackground(false)
        XCTAssertEqual(sink.done.wait(timeout: .now() + 10), .success)
        XCTAssertNil(sink.error, "paused for 3 s with a stall timeout of 1 s")
        XCTAssertEqual(sink.received, 3_000_000)
    }
}

/// Background work: paused while readers wait.
final class BackgroundSink: RangeResponseSink, @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = 0
    private var failure: FetchError?
    let done = DispatchSemaphore(value: 0)
    var isBackground: Bool { true }
    var received: Int { lock.withLock { bytes } }
    var error: FetchError? { lock.withLock { failure } }

    func receive(head: ResponseHead) -> Bool { head.status == 206 }
    func receive(body: UnsafeRawBufferPointer) -> Bool {
        lock.withLock { bytes += body.count }
        return true
    }
    func complete(error: FetchError?) {
        lock.withLock { failure = error }
        done.signal()
    }
}
