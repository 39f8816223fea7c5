// What a hop does with an answer that says "not now" (503, S3's SlowDown, 429): ask the same again after a pause,
// or give the answer to the sink, marked with how long it was asked again for (ThrottleRetry.swift has the rule).
// The pause is the engine's (CurlEngine starts the next hop when it is over); no thread waits through it.

import Dispatch
import Glibc
import RangeFSFetch

extension Transfer {
    /// The "not now" answers a request got so far.
    struct Throttled: Equatable {
        /// Uptime nanoseconds of the first.
        var since: UInt64
        var answers: Int
    }

    /// Bytes of a followed-up response's body (a redirect's, a "not now"'s) read and dropped before its connection
    /// is closed instead: enough for an error document, and no 100 MB error body read (issue 45, case 11).
    static let droppedBodyLimit = 16 << 10

    enum NotNowOutcome {
        case askAgain(FollowUp)
        /// Seconds since the first "not now" (nil: `--retry-time 0`, asked once as before).
        case giveUp(retriedFor: Double?)
    }

    /// The next step after this hop's answer said "not now". A request on one mirror of several (it has a stall
    /// timeout, Mirrors.swift) is not asked again here: another mirror takes it over at once.
    func afterNotNow() -> NotNowOutcome {
        guard hop.request?.stallTimeout == nil else { return .giveUp(retriedFor: nil) }
        let now = DispatchTime.now().uptimeNanoseconds
        let since = hop.throttled?.since ?? now
        let answers = (hop.throttled?.answers ?? 0) + 1
        let elapsed = Double(now - since) / 1e9
        let rule = ThrottleRetry(time: Double(session.options.retryTime))
        guard let pause = rule.delay(attempt: answers, elapsed: elapsed, retryAfter: responseHeader("retry-after"),
                                     now: Int64(time(nil)), jitter: Double.random(in: 0...1)) else {
            return .giveUp(retriedFor: rule.time > 0 ? elapsed : nil)
        }
        return .askAgain(.askAgain(after: pause, Throttled(since: since, answers: answers)))
    }
}
