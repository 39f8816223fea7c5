// A file's mirrors: registered for its transfers, and probed in the background, so that one whose length
// disagrees is dropped (with a log line) before it serves a byte, and each one's validator is known for its own
// If-Range.
import RangeFSSystem

extension RangeFS {
    // A file's mirrors are given with `configure` (RangeFS+Digests.swift), beside its digest.

    /// What status shows of the file at `url`'s URLs, when it has mirrors.
    func mirrorStatus(of url: String) -> [MirrorStatus]? {
        guard let mirrorSet = scheduler.mirrors.mirrors(of: url) else { return nil }
        let now = MonotonicClock.seconds()
        return mirrorSet.snapshot.map { mirror in
            let state = mirror.condition == .dropped ? "dropped"
                : mirror.condition.isUsable(at: now) ? "usable" : "set aside"
            return MirrorStatus(url: Redaction.redact(mirror.url), state: state, bytesPerSecond: mirror.speed,
                                bytes: mirror.bytes, lastError: mirror.lastError)
        }
    }

    /// The mirrors of the file at `url` (without `url` itself), for the saved list and status.
    func mirrors(of url: String) -> [String] {
        Array(scheduler.mirrors.mirrors(of: url)?.urls.dropFirst() ?? [])
    }
}
