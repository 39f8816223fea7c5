// How long a directory listing may take (issue 45). A listing is read whole before anything of it shows, and at
// mount `rangefs mount` waits for it: a server that sends a listing without end (or at a trickle just above the
// low-speed floor) would otherwise hold the mount, or a reader of the directory, for ever.
//
// Two limits end a listing, and together they bound it whatever the server does:
//   - the progress floor: every transfer's low-speed limit (HTTPOptions: under 1 KiB/s for `--timeout`, 20 s, ends
//     it), which also covers a server that sends nothing at all;
//   - the deadline, checked here whenever the server sends something: the whole listing (every page of an object
//     store's) must have arrived `--listing-timeout` seconds after it was asked for.
// So a listing ends at the latest about `--listing-timeout` + `--timeout` seconds after it started.
import RangeFSSystem

/// When a listing must have arrived by.
struct ListingDeadline: Sendable {
    /// The time allowed, in seconds (for the error).
    let seconds: Double
    private let endsAt: Double
    private let clock: @Sendable () -> Double

    /// A deadline `seconds` from now on `clock` (monotonic seconds).
    init(seconds: Double, clock: @escaping @Sendable () -> Double = MonotonicClock.seconds) {
        self.seconds = seconds
        self.clock = clock
        endsAt = clock() + seconds
    }

    /// Whether the deadline has passed.
    var isPast: Bool { clock() >= endsAt }

    var error: FetchError { .listingTimedOut(seconds) }
}
