// How one mirror of a file stands, as RangeFS reports it (RangeFS+Mirrors.swift) and the control channel's status
// answer carries it (FileStatus.mirrors). Declared here, not with the control protocol, so that the dependency
// runs one way: Control uses FileSystem, never the reverse.

import RangeFSPlatform

/// One URL of a file with mirrors, in a status answer (its fields are the JSON's; `description` is its line).
public struct MirrorStatus: Codable, Sendable, Equatable, CustomStringConvertible {
    var url: String
    /// usable, set aside (failed lately; asked again after a backoff) or dropped (disagrees with the file).
    var state: String
    /// Bytes per second of one request from it, smoothed; nil until measured.
    var bytesPerSecond: Double?
    /// Bytes brought from it since the mount.
    var bytes: UInt64
    var lastError: String?

    /// `URL: state, speed per request, bytes brought[, last error]`.
    public var description: String {
        func mebibytes(_ value: Double) -> String { cFormat("%.1f MiB", value / 1_048_576) }
        return "\(url): \(state), " + (bytesPerSecond.map { mebibytes($0) + "/s per request, " } ?? "")
            + "\(mebibytes(Double(bytes))) brought" + (lastError.map { ", last error: \($0)" } ?? "")
    }

    enum CodingKeys: String, CodingKey {
        case url, state, bytes
        case bytesPerSecond = "bytes_per_second"
        case lastError = "last_error"
    }
}
