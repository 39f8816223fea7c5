// What a transfer's sink (BlockSink.swift) reports to the scheduler that runs it, and what it counts per attempt.

/// How a transfer ended, for its owner.
enum TransferOutcome: Equatable {
    /// Every block is stored, or the transfer failed and its blocks were abandoned.
    case done
    /// The server ignores Range: the entry is now rangeless and must be streamed whole.
    case rangeIgnored
}

/// What a `BlockSink` reports to the scheduler that runs it. The sink knows only this, never the scheduler.
protocol TransferOwner: AnyObject, Sendable {
    /// Sends the sink's request (a first attempt or a retry) to a fetcher.
    func started(_ sink: BlockSink, request: RangeRequest)
    /// Calls `sink.startAttempt()` again after `delay` (a transient failure).
    func retry(_ sink: BlockSink, after delay: Duration)
    /// The remote file changed; readers of the entry were failed with `.remoteChanged` already.
    func remoteChanged(_ entry: any BlockStore)
    /// The server `origin` (scheme://host:port) was just found to rotate its ETags.
    func etagsRotate(at origin: String)
    /// Whether anybody still wants the blocks of a reader's or readahead's transfer: a live process using its file
    /// (see BlockStore.hasLiveUse), or the file being completed in the background.
    func isWanted(_ sink: BlockSink) -> Bool
    /// The transfer is over; the sink makes no more calls.
    func finished(_ sink: BlockSink, outcome: TransferOutcome)
}

/// The body bytes of one attempt of a transfer, and the proxy they came through: counted in `Metrics` once the
/// attempt ends (not per callback, on the hot path).
struct AttemptTally {
    var received = 0
    var proxy: String?

    /// Adds the attempt's bytes (by source and proxy) and its failure, if any, to the process's metrics, and
    /// starts the next attempt's count.
    mutating func count(source: String, isPrimary: Bool, outcome: FetchError?) {
        let metrics = Metrics.shared
        if received > 0 {
            metrics.add("rangefs_fetched_bytes_total", UInt64(received),
                        labels: ["source": URLOrigin.of(source) ?? "unknown", "role": isPrimary ? "origin" : "mirror"])
            if let proxy { metrics.add("rangefs_proxy_bytes_total", UInt64(received), labels: ["proxy": proxy]) }
        }
        received = 0
        proxy = nil
        if let outcome, outcome != .cancelled {
            metrics.add("rangefs_fetch_errors_total", labels: ["kind": outcome.metricKind])
        }
    }
}
