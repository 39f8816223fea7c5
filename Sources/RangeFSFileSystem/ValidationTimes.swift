// When each URL was last checked against its server (issue 48). The revalidator decides from it when an open checks
// a file again; the entry opener records a check when a stream settles a file's size (EntryOpener.swift). Made in
// `RangeFS.init` before both and given to each, so that neither holds the other.

import RangeFSSystem

/// When each URL was last checked against its server, as seconds on the monotonic clock.
final class ValidationTimes: Sendable {
    private let times = LockedBox<[String: Double]>([:])

    init() {}

    /// Records that `url` was checked at `time` (now by default, and never later than now); a later check stays.
    func record(_ url: String, at time: Double? = nil) {
        let now = MonotonicClock.seconds()
        let time = min(time ?? now, now)
        times.withLock { checked in checked[url] = max(checked[url] ?? time, time) }
    }

    /// Whether `url` went unchecked for `limit` seconds; if it did, a check is recorded now, which the caller makes.
    /// One caller of many at once gets true, so one check is made.
    func claimIfDue(_ url: String, limit: Double) -> Bool {
        let now = MonotonicClock.seconds()
        return times.withLock { checked in
            if let last = checked[url], now - last < limit { return false }
            checked[url] = now
            return true
        }
    }

    /// Whether `url` went unchecked for `limit` seconds, without recording anything.
    func isDue(_ url: String, limit: Double) -> Bool {
        let now = MonotonicClock.seconds()
        return times.withLock { checked in
            guard let last = checked[url] else { return true }
            return now - last >= limit
        }
    }

    /// Forgets the checks of `url` (it left the mount).
    func forget(_ url: String) {
        times.withLock { _ = $0.removeValue(forKey: url) }
    }
}
