import Dispatch
import Glibc

extension Duration {
    /// The duration in seconds, for arithmetic with clock readings and for showing it.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration for Dispatch's timers (`asyncAfter`), to the nanosecond.
    package var dispatchInterval: DispatchTimeInterval {
        .nanoseconds(Int(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000))
    }
}

/// Seconds on the monotonic clock, for ages of checks, listings and speed samples.
package enum MonotonicClock {
    package static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
