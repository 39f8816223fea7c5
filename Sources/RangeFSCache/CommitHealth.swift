// Group commits on a full (or failing) cache disk. A failed commit is retried by the next one, but a disk that
// stays full failed every commit, each logged, every 0.5 s (17 lines in 5 s), and an unmount then claimed that
// the cache was committed. So the store keeps one `CommitHealth`: it logs once when commits start failing and once
// when they work again, spaces the attempts out while they fail (the interval doubling up to `maximumBackoff`, so
// a disk that gets room again is noticed within that), and `status` shows the trouble meanwhile
// (`CacheStore.cacheProblems`, which also names fetched blocks that could not be written). At the end,
// `CacheStore.close` says what the mount kept in a `CacheCloseReport`, which `rangefs unmount` prints: never
// "committed" when it was not.

import RangeFSPlatform
import RangeFSSystem

/// How the store's group commits fare: working, or failing since when, how often, and why.
struct CommitHealth: Sendable {
    /// The longest wait between two attempts while commits fail.
    static let maximumBackoff: Duration = .seconds(8)

    /// When the first commit of the current run of failures failed; nil while commits work.
    var failingSince: ContinuousClock.Instant?
    /// Failed attempts in the current run.
    var failures = 0
    /// The last failure's error.
    var lastError: SystemError?
    /// Why the last write of fetched blocks failed, while writes fail (a full disk fails them before commits).
    var writeError: SystemError?

    var isFailing: Bool { failingSince != nil }

    /// How long to wait before the next periodic commit: the interval while commits work, else the interval
    /// doubled per failed attempt, up to `maximumBackoff`.
    func delay(interval: Duration) -> Duration {
        guard failures > 0 else { return interval }
        var delay = interval
        for _ in 0..<min(failures, 16) where delay < Self.maximumBackoff { delay = delay * 2 }
        return min(delay, Self.maximumBackoff)
    }

    /// What the user can do about `error`.
    static func advice(for error: SystemError) -> String {
        error.isNoSpace ? "the cache disk is full; free space on it or use --cache on a larger disk"
            : "check the cache disk (its log in dmesg, its permissions)"
    }
}

/// What a closing store says about the data of its mount: how much it stored, and how much of that is not kept.
package struct CacheCloseReport: Sendable, Equatable {
    /// Bytes written to the cache during the mount.
    var storedBytes: UInt64 = 0
    /// Of those, bytes the last commit could not make durable: their blocks are not marked present on disk, so
    /// the next mount fetches them again.
    var uncommittedBytes: UInt64 = 0
    /// Bytes fetched that could not be written at all (a full disk): readers got them from memory, the cache
    /// never held them.
    var unwrittenBytes: UInt64 = 0
    /// Why the last commit failed, if it did, with what to do about it.
    var failure: String?
    /// Why the last write failed, if writes still failed at the end.
    var writeFailure: String?

    /// Whether everything stored is committed and everything fetched was stored.
    var isClean: Bool { failure == nil && uncommittedBytes == 0 && unwrittenBytes == 0 }

    /// Bytes of this mount that the cache keeps for the next one.
    var keptBytes: UInt64 { storedBytes - min(storedBytes, uncommittedBytes) }

    /// One line on what was kept and what was not, and why; nil when the report is clean.
    var summary: String? {
        guard !isClean else { return nil }
        var parts = ["\(Self.bytes(keptBytes)) of the \(Self.bytes(storedBytes)) this mount stored are kept"]
        if uncommittedBytes > 0 || failure != nil {
            parts.append("\(Self.bytes(uncommittedBytes)) stored could not be committed (\(failure ?? "see the log"))")
        }
        if unwrittenBytes > 0 {
            let why = failure == nil ? writeFailure.map { " (\($0))" } ?? "" : ""
            parts.append("\(Self.bytes(unwrittenBytes)) fetched could not be written to the cache\(why)")
        }
        return parts.joined(separator: "; ") + "; the next mount fetches what was not kept again"
    }

    /// `value` in the largest binary unit that keeps it at or above 1, with one decimal (as `status` shows sizes).
    package static func bytes(_ value: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var amount = Double(value), unit = 0
        while amount >= 1024 && unit < units.count - 1 { amount /= 1024; unit += 1 }
        return unit == 0 ? "\(value) B" : cFormat("%.1f ", amount) + units[unit]
    }
}
