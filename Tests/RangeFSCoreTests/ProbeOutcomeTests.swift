@testable import RangeFSCache
@testable import RangeFSFetch
import XCTest

/// Issue 24: one place decides what a probe's answer means, for the mount, listed files and `rangefs add`.
final class ProbeOutcomeTests: XCTestCase {
    let cached = RemoteMetadata(url: "http://origin/a.bin", size: 10, etag: "\"v1\"", lastModified: "")
    let fresh = RemoteMetadata(url: "http://origin/a.bin", size: 12, etag: "\"v2\"", lastModified: "")

    func judge(_ result: Result<RemoteMetadata, FetchError>, cached: RemoteMetadata?, saved: Bool) -> ProbeOutcome {
        ProbeOutcome.judge(result, stored: { cached }, wasSaved: saved)
    }

    func testAnAnswerMountsTheServersVersion() {
        XCTAssertEqual(judge(.success(fresh), cached: cached, saved: true), .online(fresh))
    }

    func testAnUnreachableServerServesTheCacheOrKeepsTheURLSaved() {
        XCTAssertEqual(judge(.failure(.connectionRefused), cached: cached, saved: false),
                       .offline(cached, reason: FetchError.connectionRefused.userMessage))
        XCTAssertEqual(judge(.failure(.timedOut), cached: nil, saved: false), .failed(.timedOut, keepSaved: true))
        XCTAssertEqual(judge(.failure(.httpStatus(503)), cached: nil, saved: false),
                       .failed(.httpStatus(503), keepSaved: true), "a 5xx is an unreachable origin")
    }

    func testAGoneFileIsGoneAndOtherRefusalsKeepOnlySavedURLs() {
        XCTAssertEqual(judge(.failure(.httpStatus(404)), cached: cached, saved: true), .gone(.httpStatus(404)))
        XCTAssertEqual(judge(.failure(.httpStatus(410)), cached: nil, saved: true), .gone(.httpStatus(410)))
        XCTAssertEqual(judge(.failure(.httpStatus(403)), cached: cached, saved: true),
                       .failed(.httpStatus(403), keepSaved: true), "an expired token does not drop a saved URL")
        XCTAssertEqual(judge(.failure(.httpStatus(403)), cached: nil, saved: false),
                       .failed(.httpStatus(403), keepSaved: false))
    }

    func testADirectoryIsADirectory() {
        XCTAssertEqual(judge(.failure(.isDirectory("http://origin/d/")), cached: nil, saved: false),
                       .directory("http://origin/d/"))
    }
}
