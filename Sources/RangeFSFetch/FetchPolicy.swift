// How fetching is tuned, with every default stated once; the command line's options take their defaults from here.

/// How urgently blocks are wanted.
package enum FetchPriority: Int, Comparable, Sendable {
    case fill = 0
    case readahead = 1
    case demand = 2

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Tunables for fetching. The defaults were chosen with the benchmark (see docs/performance.md).
public struct FetchPolicy: Sendable, Equatable {
    /// The largest single Range request.
    var segmentBytes: UInt64 = 2 << 20
    /// Readahead and fill transfers running at once, over all files (demand always starts).
    public var maxTransfers = 16
    /// Readahead and fill transfers running at once for one file.
    public var connectionsPerFile = 8
    /// Background fill transfers running at once, over all files.
    var fillTransfers = 4
    /// Files completed in the background at once (`--max-downloads`); the others wait, shown as queued.
    public var maxDownloads: Int?
    /// Cap on the receive rate of background fill, in bytes per second over all fill transfers; nil for none.
    public var fillBytesPerSecond: Int?
    /// Attempts per request for transient failures; each retry resumes at the first byte not yet received.
    public var attempts = 4
    /// The first retry's delay; it doubles each time.
    var retryDelay: Duration = .milliseconds(200)
    /// How long background fill stays paused after the last demand transfer ends.
    var fillResumeDelay: Duration = .milliseconds(100)
    /// Seconds without a byte after which a request on one mirror of several is moved to another (a server that
    /// stopped answering). A healthy server sends within milliseconds; the 20 s low-speed timeout stays for a
    /// request that has nowhere else to go.
    var mirrorStallTime = 3.0

    /// The stall timeout of a request whose receive rate is capped at `bytesPerSecond`: a capped transfer reads
    /// a buffer (256 KiB) at a time, so a low cap leaves long gaps that are no stall.
    func mirrorStallTime(cappedAt bytesPerSecond: Int?) -> Double {
        guard let bytesPerSecond, bytesPerSecond > 0 else { return mirrorStallTime }
        return max(mirrorStallTime, 4 * Double(256 << 10) / Double(bytesPerSecond))
    }

    public init() {}

    /// How long to wait before the attempt after `attempt` (1 for the first): `retryDelay`, doubled each time.
    func delay(after attempt: Int) -> Duration {
        retryDelay * (1 << max(0, attempt - 1))
    }

    /// The one retry rule of block transfers and of streams: after attempt `attempt` failed with `error`, how
    /// long to wait before the next one, or nil to give up (a permanent error, or the attempts are spent).
    func retry(after error: FetchError, attempt: Int) -> Duration? {
        guard error.isTransient && attempt < attempts else { return nil }
        return delay(after: attempt)
    }
}
