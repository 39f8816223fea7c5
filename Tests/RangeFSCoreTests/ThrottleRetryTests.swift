@testable import RangeFSFetch
@testable import RangeFSSystem
import XCTest

/// The rule for asking again after "not now" (503, SlowDown, 429; issue 45 case 10): pauses that grow to 8 s,
/// with jitter, for `--retry-time` in all; a server's Retry-After wins, as delay-seconds or as a date.
final class ThrottleRetryTests: XCTestCase {
    private let rule = ThrottleRetry(time: 45)

    func testPausesDoubleFromHalfASecondToEightWithJitter() {
        let shortest = (1...8).map { rule.delay(attempt: $0, elapsed: 0, retryAfter: nil, now: 0, jitter: 0) }
        let longest = (1...8).map { rule.delay(attempt: $0, elapsed: 0, retryAfter: nil, now: 0, jitter: 1) }
        XCTAssertEqual(longest, [0.5, 1, 2, 4, 8, 8, 8, 8])
        XCTAssertEqual(shortest, [0.25, 0.5, 1, 2, 4, 4, 4, 4], "jitter takes at most half of a pause")
        XCTAssertEqual(rule.delay(attempt: 1_000, elapsed: 0, retryAfter: nil, now: 0, jitter: 1), 8, "no overflow")
    }

    func testAskingAgainOutlastsAThrottleOfThirtySeconds() {
        // The longest pauses: asked again until the time is spent, never past it.
        var elapsed = 0.0
        var answers = 0
        while let pause = rule.delay(attempt: answers + 1, elapsed: elapsed, retryAfter: nil, now: 0, jitter: 1) {
            elapsed += pause
            answers += 1
        }
        XCTAssertGreaterThanOrEqual(elapsed, 37, "asked again for most of 45 s")
        XCTAssertLessThanOrEqual(elapsed, 45)
        XCTAssertNil(ThrottleRetry(time: 0).delay(attempt: 1, elapsed: 0, retryAfter: "1", now: 0, jitter: 0),
                     "--retry-time 0 asks once")
    }

    func testRetryAfterWinsAsSecondsOrADate() {
        let now = HTTPDate.parse("Sat, 28 Nov 2026 10:00:00 GMT")!
        XCTAssertEqual(rule.delay(attempt: 1, elapsed: 0, retryAfter: "3", now: now, jitter: 0), 3)
        XCTAssertEqual(rule.delay(attempt: 1, elapsed: 0, retryAfter: " 0 ", now: now, jitter: 0), 0.1,
                       "a zero is not asking again at once, for ever")
        XCTAssertEqual(rule.delay(attempt: 1, elapsed: 0, retryAfter: "Sat, 28 Nov 2026 10:00:07 GMT", now: now,
                                  jitter: 0), 7)
        XCTAssertEqual(rule.delay(attempt: 2, elapsed: 0, retryAfter: "soon", now: now, jitter: 1), 1,
                       "a value that is neither: the usual pause")
        XCTAssertNil(rule.delay(attempt: 1, elapsed: 0, retryAfter: "3600", now: now, jitter: 0),
                     "a wait past the time gives up at once")
        XCTAssertNil(rule.delay(attempt: 1, elapsed: 0, retryAfter: "99999999999999999999", now: now, jitter: 0))
        XCTAssertNil(rule.delay(attempt: 5, elapsed: 44, retryAfter: "2", now: now, jitter: 0))
    }

    func testAnAnswerGivenUpOnIsNotRetriedAgainAndNamesTheServersFault() {
        let head = ResponseHead(status: 503, headers: [:], retriedFor: 45.2)
        XCTAssertEqual(head.statusError, .serverBusy(status: 503, seconds: 45))
        XCTAssertFalse(head.statusError.isTransient, "the layers above would multiply the time")
        XCTAssertTrue(head.statusError.isOriginUnreachable, "a cached file is still served")
        XCTAssertNil(FetchPolicy().retry(after: head.statusError, attempt: 1))
        let message = head.statusError.userMessage
        XCTAssertTrue(message.contains("45 s") && message.contains("not the URL's"), message)
        XCTAssertFalse(message.contains("check the URL"), message)
        XCTAssertFalse(FetchError.httpStatus(503).userMessage.contains("check the URL"))
        XCTAssertTrue(FetchError.httpStatus(404).userMessage.contains("check the URL"))
    }

    func testAListingSinkDoesNotKeepTheBodyOfAnAnswerGivenUpOn() {
        let outcome = LockedBox<Result<(status: Int, body: [UInt8], cut: Bool), FetchError>?>(nil)
        let sink = ListingSink(limit: 1 << 20, deadline: ListingDeadline(seconds: 600), keepingErrorBodies: true) { result in
            outcome.withLock { $0 = result }
        }
        XCTAssertFalse(sink.receive(head: ResponseHead(status: 503, headers: [:], retriedFor: 30)))
        sink.complete(error: .cancelled)
        guard case .failure(let error)? = outcome.withLock({ $0 }) else { return XCTFail("no failure") }
        XCTAssertEqual(error, .serverBusy(status: 503, seconds: 30))
    }
}
