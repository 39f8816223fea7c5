// Answers that say "not now": 503 Service Unavailable (S3's SlowDown is a 503) and 429 Too Many Requests. A
// server throttles for as long as it likes (S3 for tens of seconds while it scales a prefix out), so the attempts
// of `--retries`, 1.4 s in all, gave up long before it ended (issue 45, case 10). Such an answer is asked again
// for a time instead (`--retry-time`, 45 s by default), with pauses that double from half a second to 8 s, each
// between half and all of its length (jitter: many requests throttled together do not come back together), or as
// long as the server's Retry-After says. The engine does this below every sink (Transfer.swift), so a mount's
// probes, an open's probe, a read and a listing page all get it, and their sinks hear only the answer that ended
// it. An answer still "not now" when the time is spent reaches its sink marked (`ResponseHead.retriedFor`), and
// fails with `.serverBusy`, which no layer above retries again: their attempts would multiply the time.
import RangeFSSystem

/// The rule for asking again after an answer that says "not now".
package struct ThrottleRetry: Sendable, Equatable {
    /// Seconds from the first "not now" after which the answer is given to its sink; 0 asks once only.
    package var time: Double
    /// The first pause, and the longest, in seconds.
    package static let firstDelay = 0.5
    package static let longestDelay = 8.0

    package init(time: Double) {
        self.time = time
    }

    /// Whether `status` says "not now, later" rather than something about the request.
    package static func isThrottle(_ status: Int) -> Bool {
        status == 503 || status == 429
    }

    /// Seconds to wait before asking again after the `attempt`-th "not now" (1 for the first), which came
    /// `elapsed` seconds after the first, with the answer's `Retry-After` (if any) read at `now` (seconds since
    /// 1970); `jitter` in 0...1 picks the pause within its range. Nil to give up: the time is spent, or the
    /// server asks for a wait that would pass it.
    package func delay(attempt: Int, elapsed: Double, retryAfter: String?, now: Int64, jitter: Double) -> Double? {
        guard time > 0 else { return nil }
        let pause: Double
        if let retryAfter, let asked = Self.seconds(retryAfter: retryAfter, now: now) {
            // A server's own word wins, but not a zero: that would be asking again at once, for ever.
            pause = max(asked, 0.1)
        } else {
            let ceiling = min(Self.longestDelay, Self.firstDelay * Double(1 << min(max(attempt - 1, 0), 10)))
            pause = ceiling / 2 + ceiling / 2 * min(max(jitter, 0), 1)
        }
        return elapsed + pause <= time ? pause : nil
    }

    /// A `Retry-After` value in seconds from now: delay-seconds, or an HTTP date (RFC 9110 §10.2.3); nil if it is
    /// neither.
    package static func seconds(retryAfter value: String, now: Int64) -> Double? {
        let text = value.trimmingWhitespace()
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return text.count <= 9 ? Double(text) : Double(Int32.max)  // any wait longer than the time gives up
        }
        guard let date = HTTPDate.parse(text) else { return nil }
        return Double(max(0, date - now))
    }
}
