// Receives one request's body and stores it block by block, so a reader waiting for an early block is answered
// while the rest of the request is still streaming. On a transient failure it asks again from the first byte it
// does not have (mid-block included): a connection dropped in the middle of a large request costs nothing twice.
//
// A 200 to a ranged request has two causes, told apart by the response's validator and length:
//   - the file changed (another ETag, Last-Modified or size): the entry is stale; the scheduler's observer
//     re-probes the URL and readers of the old version get ESTALE;
//   - the server ignores Range (same validator): the entry becomes "rangeless" and its blocks come from one
//     whole-file stream, in order, which this sink also runs (`wholeFile`). Its readers wait for their bytes.

import Synchronization

/// Streams a response into a cache entry.
final class BlockSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread at a time (head, body..., complete), and
    // a retry starts only after `complete` returned, so the mutable fields are never touched concurrently.

    private let entry: CacheEntry
    private let url: String
    private let blocks: Range<Int>
    /// Streams the whole file without a Range header, skipping blocks already present.
    private let wholeFile: Bool
    /// Fill can be promoted to demand while it runs (a reader needs its blocks); read from the fetcher's thread.
    private let currentPriority: Mutex<FetchPriority>
    private let maxBytesPerSecond: Int?
    // Strong: a transfer may finish after everything else let go of the scheduler (no cycle: it keeps no sinks).
    private let scheduler: FetchScheduler
    /// The first block not yet stored; blocks before it in `blocks` are present.
    private var nextBlock: Int
    /// Bytes of `nextBlock` received so far; handed to the entry when the block is whole.
    private var partial: BlockBuffer
    /// Attempts since the last one that made progress.
    private var attempt = 0
    /// Where the current attempt started, to tell whether it made progress.
    private var attemptStart: UInt64 = 0
    /// Why the current attempt was cancelled by us, if it was.
    private var failure: FetchError?

    init(entry: CacheEntry, url: String, blocks: Range<Int>, wholeFile: Bool = false, priority: FetchPriority,
         maxBytesPerSecond: Int?, scheduler: FetchScheduler) {
        self.entry = entry
        self.url = url
        self.blocks = blocks
        self.wholeFile = wholeFile
        self.currentPriority = Mutex(priority)
        self.maxBytesPerSecond = maxBytesPerSecond
        self.scheduler = scheduler
        self.nextBlock = blocks.lowerBound
        partial = BlockBuffer(capacity: entry.length(ofBlock: blocks.lowerBound))
    }

    /// The first byte still wanted.
    private var resumeOffset: UInt64 {
        entry.byteRange(of: nextBlock..<(nextBlock + 1)).lowerBound + UInt64(partial.count)
    }

    private var wanted: Range<UInt64> {
        resumeOffset..<entry.byteRange(of: blocks).upperBound
    }

    func startAttempt() {
        if wholeFile {
            nextBlock = blocks.lowerBound  // without Range, every attempt starts at byte 0
            partial = BlockBuffer(capacity: entry.length(ofBlock: nextBlock))
        }
        attempt += 1
        attemptStart = resumeOffset
        failure = nil
        var request = RangeRequest(url: url, range: wholeFile ? nil : wanted, ifRange: entry.validator)
        request.maxBytesPerSecond = maxBytesPerSecond
        // The first attempt of demand work (and every retry of it) goes to the demand fetcher.
        (priority == .demand ? scheduler.demandFetcher : scheduler.fetcher).start(request, sink: self)
    }

    var priority: FetchPriority { currentPriority.withLock { $0 } }
    var isBackground: Bool { priority == .fill }
    /// Readahead and fill of a file the user paused wait; a reader's own request never does.
    var isPaused: Bool { priority != .demand && entry.isPaused }

    /// The blocks this transfer still has to bring.
    var remainingBlocks: Range<Int> { nextBlock..<blocks.upperBound }
    /// The blocks this transfer covers, for overlap checks from other threads (immutable).
    var coveredBlocks: Range<Int> { blocks }
    var cacheEntry: CacheEntry { entry }

    /// Makes a running fill transfer demand work: a reader waits for its blocks.
    func promoteToDemand() { currentPriority.withLock { $0 = .demand } }

    func receive(head: ResponseHead) -> Bool {
        switch head.status {
        case 206 where !wholeFile:
            let value = head["content-range"] ?? "(missing)"
            guard let contentRange = ContentRange(parsing: value), let range = contentRange.range,
                  range.lowerBound == wanted.lowerBound, range.upperBound <= wanted.upperBound, !range.isEmpty
            else {
                failure = .badContentRange(value)
                return false
            }
            if let total = contentRange.completeLength, total != entry.size {
                failure = .remoteChanged
                return false
            }
            return true
        case 200:
            let now = RemoteMetadata(url: url, size: head["content-length"].flatMap(UInt64.init) ?? entry.size,
                                     etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "")
            guard entry.matches(now) else {
                failure = .remoteChanged
                return false
            }
            if wholeFile { return true }
            failure = .rangeIgnored
            return false
        default:
            failure = head.status == 206 ? .badContentRange("206 to a request without Range") : .httpStatus(head.status)
            return false
        }
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        var remaining = body
        while !remaining.isEmpty {
            guard nextBlock < blocks.upperBound else {
                failure = .badContentRange("body longer than the requested range")
                return false
            }
            let taken = partial.append(remaining)
            remaining = UnsafeRawBufferPointer(rebasing: remaining[taken...])
            if partial.isFull { storeBlock() }
        }
        return true
    }

    /// Hands `nextBlock` to the entry (unless a whole-file stream passes a block that is already here) and moves
    /// on with a buffer for the next one.
    private func storeBlock() {
        let length = partial.count
        let handOver = !(wholeFile && entry.isPresent(nextBlock))
        if handOver {
            let (store, entry, index) = (scheduler.store, entry, nextBlock)
            store.reserveRoom(for: length)
            let accepted = entry.accept(block: index, buffer: partial, writeBackNow: isBackground) { stored in
                guard stored else { return store.account(-length) }
                store.recordUse(entry, blocks: index..<(index + 1))
                if entry.bytesSinceCommit >= store.commitBytes { store.commitSoon(entry) }
            }
            if !accepted { store.account(-length) }
        }
        nextBlock += 1
        let nextLength = entry.length(ofBlock: nextBlock)
        if handOver || nextLength != partial.capacity {
            partial = BlockBuffer(capacity: nextLength)
        } else {
            partial.reset()
        }
    }

    func complete(error: FetchError?) {
        var outcome = failure ?? error
        if resumeOffset > attemptStart { attempt = 0 }
        if outcome == nil && nextBlock < blocks.upperBound {
            // A 206 may carry less than asked for: ask for the rest. Only an answer with no progress is an error.
            if attempt == 0 && !wholeFile {
                startAttempt()
                return
            }
            outcome = .shortBody
        }
        guard let outcome else { return finish() }
        if outcome == .rangeIgnored {
            scheduler.logger.warning("\(Redaction.redact(url)) ignores Range requests; streaming it whole instead")
            entry.markRangeless()
            entry.releaseClaims(nextBlock..<blocks.upperBound)
            scheduler.startStream(entry, url: url)
            return finish()
        }
        if outcome.isTransient && attempt < scheduler.policy.attempts {
            let delay = scheduler.policy.retryDelay * (1 << max(0, attempt - 1))
            scheduler.logger.info("retrying \(Redaction.redact(url)) from byte \(resumeOffset) in \(delay): \(outcome.userMessage)")
            scheduler.after(delay) { self.startAttempt() }
            return
        }
        scheduler.logger.warning("fetching \(Redaction.redact(url)) bytes \(wanted) failed: \(outcome.userMessage)")
        entry.abandon(blocks: nextBlock..<blocks.upperBound, error: outcome)
        if outcome == .remoteChanged { scheduler.reportRemoteChange(entry) }
        finish()
    }

    private func finish() {
        if wholeFile { entry.endStream() }
        scheduler.transferFinished(entry, priority: priority, sink: self)
    }
}

extension CacheEntry {
    /// What to send as If-Range for this entry's version of the file.
    var validator: String? { header.remoteMetadata.ifRangeValidator }
}
