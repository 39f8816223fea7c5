// What the `status` verb answers (RangeFS+Status.swift): each file's state, and the sums over the mount. They are
// the core's values, which the control channel carries as they are (their coding keys are its wire format).

/// What `status` found: the files it shows, and with a full status the totals and what weakens the mount.
package struct MountStatus: Sendable, Equatable {
    package var files: [FileStatus]
    /// The sums over every file of the mount (nil for an active status, which sums nothing).
    package var totals: StatusTotals?
    /// Whether the kernel reads complete files itself (FUSE passthrough), or why not.
    package var passthrough: String?
    /// The proxy chain, with the group in use and the proxies that failed; nil without --proxy.
    package var proxy: String?
    /// What is wrong with the cache disk now (failed writes or commits); empty when nothing is.
    package var cacheProblems: [String] = []
}

/// One file in a status answer.
/// More than 12 stored properties: a record, one field per value `rangefs status` shows of a file, encoded as JSON.
public struct FileStatus: Codable, Sendable, Equatable {
    public var name: String
    public var url: String
    public var size: UInt64
    public var cachedBytes: UInt64
    /// complete, partial, downloading, queued, paused, error, read through (larger than `--cache-max-size`: read
    /// through a window of the cache, never completed), offline (served from the cache alone; its server
    /// cannot be reached), unmounted (saved, but unreachable at mount with nothing cached) or, for a directory
    /// (its name ends in `/`), not listed (nobody has looked into it yet), error (it cannot be listed) or listed in
    /// part (more entries than the cap).
    public var state: String
    /// Bytes per second stored over the last few seconds.
    public var bytesPerSecond: Double
    /// Seconds to completion at that speed, if it is downloading.
    public var etaSeconds: Double?
    /// The block map, squeezed to `mapWidth` cells: ' ' none, '.' some, ':' most, '#' all of its blocks local.
    public var map: String
    public var lastError: String?
    public var pinned: Bool = false
    /// Handles the kernel reads through itself, past the daemon (FUSE passthrough).
    public var passthroughHandles = 0
    /// READ requests the daemon answered for this file since the mount (a passthrough handle sends none).
    var daemonReads = 0
    /// The file's URLs, its own first, when it has mirrors.
    public var mirrors: [MirrorStatus]?
    /// The end-to-end check of a complete file: `verified sha256 (ORIGIN)`, `MISMATCH ...`, `unverified ...`.
    public var digest: String?
    /// Why the file stays partial although it is used: under `--cache-max-size`, a file larger than the cap is read
    /// through (state `read through`), and a fill that ran out of room stopped.
    public var note: String?

    enum CodingKeys: String, CodingKey {
        case name, url, size, state, map, pinned, digest, note
        case cachedBytes = "cached_bytes"
        case bytesPerSecond = "bytes_per_second"
        case etaSeconds = "eta_seconds"
        case lastError = "last_error"
        case passthroughHandles = "passthrough_handles"
        case daemonReads = "daemon_reads"
        case mirrors
    }
}

/// The sums a status answer gives over every file of the mount.
public struct StatusTotals: Codable, Sendable, Equatable {
    public var files = 0
    public var size: UInt64 = 0
    public var cachedBytes: UInt64 = 0
    public var bytesPerSecond = 0.0

    public init() {}

    /// Adds one file.
    mutating func count(_ file: FileStatus) {
        files += 1
        size += file.size
        cachedBytes += file.cachedBytes
        bytesPerSecond += file.bytesPerSecond
    }

    enum CodingKeys: String, CodingKey {
        case files, size
        case cachedBytes = "cached_bytes"
        case bytesPerSecond = "bytes_per_second"
    }
}
