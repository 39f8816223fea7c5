// What a transfer's sink (BlockSink.swift) reports to the scheduler that runs it, and what it counts per attempt.
import RangeFSCache
import RangeFSSystem

/// How a transfer ended, for its owner.
enum TransferOutcome: Equatable {
    /// Every block is stored, or the transfer failed and its blocks were abandoned.
    case done
    /// The server ignores Range: the entry is now rangeless and must be streamed whole.
    case rangeIgnored
    /// A whole-file stream ended with readers waiting for blocks it stored and the cap evicted: stream again.
    case streamAgain
}

/// What a `BlockSink` reports to the scheduler that runs it. The sink knows only this, never the scheduler.
/// The engines a transfer sends its attempts through: demand work (and every retry of it) on the demand engine,
/// readahead and fill on the other, so that a reader's request never queues behind background ones.
struct TransferEngines: Sendable {
    let demand: any RangeFetching
    let background: any RangeFetching

    func engine(for priority: FetchPriority) -> any RangeFetching { priority == .demand ? demand : background }
}

protocol TransferOwner: AnyObject, Sendable {
    /// Calls `sink.startAttempt()` again after `delay` (a transient failure).
    func retry(_ sink: BlockSink, after delay: Duration)
    /// The remote file changed; readers of the entry were failed with `.remoteChanged` already.
    func remoteChanged(_ entry: any BlockStore)
    /// The server `origin` (scheme://host:port) was just found to rotate its ETags.
    func etagsRotate(at origin: String)
    /// Whether anybody still wants the blocks of a reader's or readahead's transfer: a live process using its file
    /// (see BlockStore.use), or the file being completed in the background.
    func isWanted(_ sink: BlockSink) -> Bool
    /// A stream of a file of unknown size moved from the entry it outgrew to the grown one (BlockSink+Growth).
    func moved(_ sink: BlockSink, from old: any BlockStore, to new: any BlockStore)
    /// The transfer is over; the sink makes no more calls.
    func finished(_ sink: BlockSink, outcome: TransferOutcome)
}

/// The body bytes of one attempt of a transfer, and the proxy they came through: counted once the attempt ends
/// (not per callback, on the hot path). The sink knows no `Metrics`: what it counts waits here until its owner,
/// which the sink calls after every attempt (`started`, `retry` or `finished`), moves it into the mount's registry.
struct AttemptTally {
    /// One addition to a counter, waiting for `drain`.
    struct Addition {
        let name: String
        let value: UInt64
        let labels: KeyValuePairs<String, String>
    }

    var received = 0
    var proxy: String?
    /// What ended attempts counted and no owner has drained yet.
    private(set) var settled: [Addition] = []

    /// Adds the attempt's bytes (by source and proxy) and its failure, if any, to what waits for `drain`, and
    /// starts the next attempt's count.
    mutating func count(source: String, isPrimary: Bool, outcome: FetchError?) {
        if received > 0 {
            settled.append(Addition(name: "rangefs_fetched_bytes_total", value: UInt64(received),
                                    labels: ["source": URLOrigin.of(source) ?? "unknown",
                                             "role": isPrimary ? "origin" : "mirror"]))
            if let proxy {
                settled.append(Addition(name: "rangefs_proxy_bytes_total", value: UInt64(received),
                                        labels: ["proxy": proxy]))
            }
        }
        received = 0
        proxy = nil
        if let outcome, outcome != .cancelled {
            settled.append(Addition(name: "rangefs_fetch_errors_total", value: 1, labels: ["kind": outcome.metricKind]))
        }
    }

    /// Moves what ended attempts counted into `metrics`.
    mutating func drain(into metrics: Metrics) {
        for addition in settled { metrics.add(addition.name, addition.value, labels: addition.labels) }
        settled.removeAll()
    }
}
