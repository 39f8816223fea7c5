// Receives one request's body and stores it block by block, so a reader waiting for an early block is answered
// while the rest of the request is still streaming. On a transient failure it asks again from the first byte it
// does not have (mid-block included): a connection dropped in the middle of a large request costs nothing twice.
//
// A 200 to a ranged request has two causes, told apart by the response's validator and length:
//   - the file changed (another ETag, Last-Modified or size): the entry is stale; the scheduler's observer
//     re-probes the URL and readers of the old version get ESTALE;
//   - the server ignores Range (same validator): the entry becomes "rangeless" and its blocks come from one
//     whole-file stream, in order, which this sink also runs (`wholeFile`). Its readers wait for their bytes.
// A 200 whose Content-Range is exactly the range asked for (rclone serve s3) is neither: it is a part, taken as a
// 206 is, once its validators show it is of the cached version, since such a server ignores If-Range
// (ResponseHead+Range.swift decides, for every reader of answers).
//
// No byte of a wrong answer is kept (see ResponseHead+Trust.swift): an answer in another encoding than identity,
// or whose Content-Length disagrees with its range, is refused at its head; a body no header gives a length to is
// held back, whole, until it ended exactly where its Content-Range said, and dropped otherwise. Such a refusal is
// retried like a cut transfer (another mirror first), and fails the blocks once the attempts are spent.
//
// A file with mirrors (`MirrorSet`) asks one of them per attempt. A mirror that fails is set aside and the attempt
// goes on at once from the byte where it broke on another; one whose length disagrees, or that ignores Range, is
// dropped for the file. A 200 from a mirror says that mirror changed or ignores Range, never that the file did.

import Dispatch
import Logging
import RangeFSCache
import RangeFSSystem

/// Streams a response into a cached file, through its `BlockStore`.
/// More than 12 stored properties: one for each of the concepts a response's stream goes through
/// (BlockSink+State.swift: plan, context, attempt, progress, interest, growth), plus the blocks it serves and the entry
/// it writes to.
package final class BlockSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread at a time (head, body..., complete), and
    // a retry starts only after `complete` returned, so the mutable fields are never touched concurrently.

    // Thirteen stored properties, each a concept of its own: the entry and where in it the stream stands (five,
    // two of them the copy other threads read), the plan and the context fixed at birth, the current attempt's
    // findings, what attempts have made of the transfer so far, whether anybody still wants it, the growth of an
    // entry of unknown size, and the priority.

    /// The entry the blocks go to; a stream of a file of unknown size moves on to the entry that replaced the one
    /// it outgrew (`adoptGrownEntry`). Read on the fetcher's thread; other threads read `shared`.
    private(set) var entry: any BlockStore
    /// `entry` and `blocks`, for the scheduler's threads (`blockStore`, `coveredBlocks`).
    private let shared: LockedBox<(store: any BlockStore, blocks: Range<Int>)>
    private var blocks: Range<Int>
    /// The first block not yet stored; blocks before it in `blocks` are present.
    var nextBlock: Int
    /// Bytes of `nextBlock` received so far; handed to the entry when the block is whole.
    var partial: BlockBuffer
    /// What the transfer asks for, and how.
    let plan: Plan
    /// Who the transfer answers to and runs through.
    let context: Context
    /// What the current attempt found; each attempt starts a new one (`beginAttempt`).
    var current = Attempt()
    /// Body bytes received in the current attempt, and the proxy they came through (drained by the scheduler).
    var tally = AttemptTally()
    /// What the attempts so far made of the transfer: whether it is still making progress.
    private var progress = Progress()
    /// Whether anybody still wants the transfer's blocks, asked now and then (`Interest`).
    private var interest = Interest()
    /// A stream of a file of unknown size that outgrew its entry, while the store grows it (BlockSink+Growth).
    let growth = LockedBox(Growth())
    /// Fill can be promoted to demand while it runs (a reader needs its blocks); read from the fetcher's thread.
    private let currentPriority: LockedBox<FetchPriority>

    /// The file's own URL (the primary, with mirrors).
    var url: String { plan.url }
    /// The entry the transfer started on: the scheduler counts it as that entry's until it ends.
    var countedStore: any BlockStore { plan.countedStore }

    init(entry: any BlockStore, url: String, mirrors: MirrorSet? = nil, blocks: Range<Int>, wholeFile: Bool = false,
         priority: FetchPriority, maxBytesPerSecond: Int?, policy: FetchPolicy, logger: Logger,
         engines: TransferEngines, metrics: Metrics, owner: TransferOwner) {
        self.entry = entry
        shared = LockedBox((entry, blocks))
        self.blocks = blocks
        nextBlock = blocks.lowerBound
        plan = Plan(url: url, mirrors: wholeFile ? nil : mirrors, wholeFile: wholeFile,
                    sizeUnknown: !entry.version.remoteMetadata.sizeKnown, maxBytesPerSecond: maxBytesPerSecond,
                    countedStore: entry)
        context = Context(engines: engines, metrics: metrics, policy: policy, logger: logger, owner: owner)
        currentPriority = LockedBox(priority)
        partial = entry.makeBuffer(capacity: entry.length(ofBlock: blocks.lowerBound))
    }

    /// The first byte still wanted.
    private var resumeOffset: UInt64 {
        entry.byteRange(of: nextBlock..<(nextBlock + 1)).lowerBound + UInt64(partial.count)
    }

    var wanted: Range<UInt64> {
        resumeOffset..<entry.byteRange(of: blocks).upperBound
    }

    /// Sends the next attempt (the first, or a retry) through the engine for the transfer's priority now (a fill
    /// promoted for a reader goes on with the demand engine); what the attempt before it counted goes to the
    /// mount's metrics first.
    func startAttempt() {
        let request = beginAttempt()
        tally.drain(into: context.metrics)
        context.engines.engine(for: priority).start(request, sink: self)
    }

    /// Takes over, as this sink's first attempt, a request already sent for exactly this sink's bytes from the
    /// file's own URL (the rest of an open's probe, see ProbeBody.swift): its answer comes to this sink as if it
    /// had sent it. It counts as wanted to its end without asking: the open the probe is for gets its handle only
    /// after the hand-over, and a file fetched ahead of a reader (DirectoryPrefetch.swift) has no handle until the
    /// reader gets there; cutting it would drop its connection for at most the probe's 256 KiB.
    func adoptAttempt() {
        _ = beginAttempt()
        interest.checkedAt = DispatchTime.now().uptimeNanoseconds
        interest.wantedWithoutAskingUntil = .max
    }

    /// Whether anybody still wants this transfer's blocks (see TransferOwner.isWanted).
    private var isWanted: Bool {
        DispatchTime.now().uptimeNanoseconds < interest.wantedWithoutAskingUntil || context.owner.isWanted(self)
    }

    /// Resets the state of a new attempt, and returns its request.
    private func beginAttempt() -> RangeRequest {
        if plan.wholeFile {
            nextBlock = blocks.lowerBound  // without Range, every attempt starts at byte 0
            partial = entry.makeBuffer(capacity: entry.length(ofBlock: nextBlock))
        }
        progress.attempts += 1
        current = Attempt(startOffset: resumeOffset, firstBlock: nextBlock, partialBytes: partial.count)
        var request = RangeRequest(url: url, range: plan.wholeFile ? nil : wanted, ifRange: entry.validator)
        if let mirrors = plan.mirrors {
            let choice = mirrors.choose(avoiding: mirrors.earlierSources(of: remainingBlocks))
            current.choice = choice
            current.began = MonotonicClock.seconds()
            request.url = choice.url
            if !choice.isPrimary { request.ifRange = choice.validator }
            // Where another mirror could take over, a server that stops sending is left after seconds, not after
            // the low-speed timeout: the request goes on from its byte elsewhere (see `complete`).
            if mirrors.hasUsableMirror(besides: choice.index) {
                request.stallTimeout = context.policy.mirrorStallTime(cappedAt: plan.maxBytesPerSecond)
            }
        }
        request.maxBytesPerSecond = plan.maxBytesPerSecond
        return request
    }

    var priority: FetchPriority { currentPriority.withLock { $0 } }
    package var isBackground: Bool { priority == .fill }
    /// Readahead and fill of a file the user paused wait; a reader's own request never does.
    package var isPaused: Bool { growth.withLock { $0.waiting } || (priority != .demand && entry.isPaused) }

    /// The blocks this transfer still has to bring.
    var remainingBlocks: Range<Int> { nextBlock..<blocks.upperBound }
    /// The blocks this transfer covers, for overlap checks from other threads (immutable).
    var coveredBlocks: Range<Int> { shared.withLock { $0.blocks } }
    var blockStore: any BlockStore { shared.withLock { $0.store } }

    /// Moves this transfer to `store`, now covering `blocks` (a grown entry of unknown size); fetcher's thread.
    func move(to store: any BlockStore, blocks: Range<Int>) {
        entry = store
        self.blocks = blocks
        shared.withLock { $0 = (store, blocks) }
    }

    /// Makes a running fill transfer demand work: a reader waits for its blocks.
    func promoteToDemand() { currentPriority.withLock { $0 = .demand } }

    package func receive(body: UnsafeRawBufferPointer) -> Bool {
        if current.errorBody != nil { return receive(errorBytes: body) }
        if growth.withLock({ $0.pending }) {
            guard adoptGrownEntry() else { return false }
        }
        tally.received += body.count
        current.bodyReceived += UInt64(body.count)
        let now = DispatchTime.now().uptimeNanoseconds
        if now - interest.checkedAt >= Interest.checkInterval {
            interest.checkedAt = now
            if priority != .fill && !isWanted {
                interest.unwanted = true
                current.failure = .cancelled
                return false
            }
        }
        if let expectedBody = current.expectedBody, current.bodyReceived > expectedBody {
            current.failure = .untrustedBody("its body is longer than the \(expectedBody) bytes its head states")
            return false
        }
        return store(body)
    }

    /// Cuts `body` into the blocks it completes, and keeps the rest in `partial`; false (with `failure`) to end
    /// the transfer.
    func store(_ body: UnsafeRawBufferPointer) -> Bool {
        var remaining = body
        while !remaining.isEmpty {
            guard nextBlock < blocks.upperBound else {
                if plan.sizeUnknown && plan.wholeFile {
                    // Not a failure: the entry gets more room, and this stream goes on into it (BlockSink+Growth).
                    outgrowEntry(keeping: remaining)
                    return true
                }
                current.failure = .badContentRange("body longer than the requested range")
                return false
            }
            let taken = partial.append(remaining)
            // SAFETY: `append` took at most `remaining.count` bytes, so the rest is a valid slice.
            remaining = UnsafeRawBufferPointer(rebasing: remaining[taken...])
            if partial.isFull, !storeBlock() { return false }
        }
        return true
    }

    /// Hands `nextBlock` to the entry (unless a whole-file stream passes a block that is already here) and moves
    /// on with a buffer for the next one. A whole-file stream compares a block already here with the CRC it was
    /// written with: after a restart, a server without Range sends the kept blocks again, and other bytes are
    /// another version of the file (a server without an ETag tells no other way). Returns false then, with
    /// `failure` set: the entry's readers get ESTALE, and its blocks are not mixed with the new version's.
    private func storeBlock() -> Bool {
        if current.holdingBack {
            current.held.append(partial)
            nextBlock += 1
            partial = entry.makeBuffer(capacity: entry.length(ofBlock: nextBlock))
            return true
        }
        var handOver = true
        if plan.wholeFile, let kept = entry.presentChecksum(ofBlock: nextBlock) {
            guard CRC32C.checksum(partial.bytes) == kept else {
                context.logger.notice("\(Redaction.redact(url)) sent other bytes for block \(nextBlock) than those cached; the file changed on the server")
                current.failure = .remoteChanged
                return false
            }
            handOver = false
        }
        if handOver { hand(block: nextBlock, buffer: partial) }
        nextBlock += 1
        let nextLength = entry.length(ofBlock: nextBlock)
        if handOver || nextLength != partial.capacity {
            partial = entry.makeBuffer(capacity: nextLength)
        } else {
            partial.reset()
        }
        return true
    }

    /// Hands a whole block to the entry, and records which mirror it came from.
    private func hand(block index: Int, buffer: BlockBuffer) {
        let priority = priority
        entry.put(block: index, buffer: buffer, background: priority == .fill, budgeted: priority != .demand)
        if let mirrors = plan.mirrors, let choice = current.choice { mirrors.recordSource(block: index, mirror: choice.index) }
    }

    /// Stores the blocks held back from a body without a stated length once it ended where its Content-Range
    /// said; otherwise drops them and this attempt's bytes, and says why.
    private func settleHeldBlocks(_ outcome: FetchError?) -> FetchError? {
        guard current.holdingBack else { return outcome }
        current.holdingBack = false
        var outcome = outcome
        if outcome == nil, let expectedBody = current.expectedBody, current.bodyReceived != expectedBody {
            outcome = .untrustedBody("its body ended after \(current.bodyReceived) of the \(expectedBody) bytes its Content-Range states")
        }
        let blocks = current.held
        current.held = []
        if outcome == nil {
            for (offset, buffer) in blocks.enumerated() { hand(block: current.firstBlock + offset, buffer: buffer) }
            return nil
        }
        // Back to where the attempt began, keeping the bytes of its first block that came before it.
        if let first = blocks.first { partial = first }
        partial.keep(first: current.partialBytes)
        nextBlock = current.firstBlock
        return outcome
    }

    package func complete(error: FetchError?) {
        // A body that ended while the store grew its entry ends once the grown entry took the bytes past the old one.
        if deferWhileGrowing(error) { return }
        var error = error
        if growth.withLock({ $0.pending }), !adoptGrownEntry() {
            error = error ?? current.failure
        }
        var outcome = settleHeldBlocks(objectStoreFailure(current.failure) ?? error)
        tally.count(source: current.choice?.url ?? url, isPrimary: current.choice?.isPrimary ?? true, outcome: outcome)
        if plan.sizeUnknown && plan.wholeFile && outcome == nil { return endOfUnknownSize() }
        if let mirrors = plan.mirrors, let choice = current.choice {
            mirrors.finished(choice, bytes: resumeOffset - current.startOffset,
                             seconds: MonotonicClock.seconds() - current.began, error: outcome)
        }
        // Progress is a block stored (or a block's worth of bytes): a server that trickles a few bytes per attempt
        // runs out of attempts like one that sends nothing, so no read waits on it forever.
        // A whole-file stream starts every attempt at byte 0: only blocks past the furthest an attempt reached are
        // progress (a server that dropped every stream at the same byte was streamed again for ever).
        let progressed = plan.wholeFile ? nextBlock > progress.furthestBlock
            : nextBlock > current.firstBlock || resumeOffset >= current.startOffset + UInt64(entry.blockSize)
        if plan.wholeFile { progress.furthestBlock = max(progress.furthestBlock, nextBlock) }
        if progressed { progress.attempts = 0 }
        if current.askAgain {
            current.askAgain = false
            progress.attempts = max(0, progress.attempts - 1)  // not a failure: the same request with the validator that works
            return startAttempt()
        }
        // Nobody wants the rest (checked during the body, and before any retry): its claims go back, so that a
        // later read asks afresh.
        let mayLeave = outcome != nil && outcome != .remoteChanged && outcome != .rangeIgnored && priority != .fill
        if interest.unwanted || (mayLeave && !isWanted) {
            // Asked again: a reader may have come for these blocks since the body was left.
            if interest.unwanted && isWanted {
                interest.unwanted = false
                progress.attempts = max(0, progress.attempts - 1)
                return startAttempt()
            }
            context.logger.info("stopped fetching \(Redaction.redact(url)) bytes \(wanted): every process that read it is gone")
            entry.abandon(blocks: nextBlock..<blocks.upperBound, error: .cancelled)
            return finish(.done)
        }
        if outcome == nil && nextBlock < blocks.upperBound {
            // A 206 may carry less than asked for: ask for the rest. Only an answer with no progress is an error.
            if progress.attempts == 0 && !plan.wholeFile {
                startAttempt()
                return
            }
            outcome = .shortBody
        }
        guard var outcome else { return finish(.done) }
        if let mirrors = plan.mirrors, let choice = current.choice, outcome != .cancelled, choice.isPrimary == false || outcome != .remoteChanged {
            let shown = Redaction.redact(choice.url)
            if let dropReason = current.dropReason {
                mirrors.drop(choice, reason: dropReason)
                context.logger.warning("mirror \(shown) is dropped for \(Redaction.redact(url)): \(dropReason)")
            } else {
                mirrors.setAside(choice, because: outcome)
            }
            if !choice.isPrimary && outcome == .remoteChanged {
                outcome = .transport("the mirror \(shown) changed")  // the file did not: another mirror may serve it
            }
            if mirrors.hasUsableMirror {
                context.logger.info("\(shown) failed (\(outcome.userMessage)); going on from byte \(resumeOffset) on another mirror")
                progress.attempts = max(0, progress.attempts - 1)  // a switch of mirror is not a retry
                startAttempt()
                return
            }
            if outcome == .rangeIgnored { outcome = .transport("every mirror failed; the last ignores Range requests") }
        }
        if outcome == .rangeIgnored {
            context.logger.warning("\(Redaction.redact(url)) ignores Range requests; streaming it whole instead")
            entry.markRangeless()
            entry.releaseClaims(nextBlock..<blocks.upperBound)
            return finish(.rangeIgnored)
        }
        if let delay = context.policy.retry(after: outcome, attempt: progress.attempts) {
            context.logger.info("retrying \(Redaction.redact(url)) from byte \(resumeOffset) in \(delay): \(outcome.userMessage)")
            context.owner.retry(self, after: delay)
            return
        }
        context.logger.warning("fetching \(Redaction.redact(url)) bytes \(wanted) failed: \(outcome.userMessage)")
        // Readers are failed first: each registers the ESTALE answer it waits to send before the owner is told.
        entry.abandon(blocks: nextBlock..<blocks.upperBound, error: outcome.blockFailure)
        if outcome == .remoteChanged { context.owner.remoteChanged(entry) }
        finish(.done)
    }

    /// The stream of a file of unknown size ended, so its length is the size: the store settles the entry
    /// (`StreamStep.ended`), and the old entry's readers get `.replaced` then.
    /// The stream is not ended on the entry, and the claims past the end stay: no other stream (a fill's) starts
    /// on an entry about to go stale; the store ends it if it cannot reshape it.
    private func endOfUnknownSize() {
        entry.stream(.ended(size: resumeOffset, lastBlock: Array(partial.bytes)))
        context.owner.finished(self, outcome: .done)
    }

    private func finish(_ outcome: TransferOutcome) {
        // A stream under a cap smaller than the file evicts what it stored behind it: a reader that then asked for
        // such a block found this stream running and waits for it, so it goes on with another.
        if plan.wholeFile, entry.endStream(), outcome == .done {
            return context.owner.finished(self, outcome: .streamAgain)
        }
        context.owner.finished(self, outcome: outcome)
    }
}
