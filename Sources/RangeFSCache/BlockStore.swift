// The seam between Fetch and Cache: all that fetching needs of one cached file. Fetch claims blocks, puts the
// blocks it receives, and fails the ones it cannot bring, through these protocols alone; it never sees a data file,
// a CRC or the store. `CacheEntry` is the one implementation (and the cache knows nothing of HTTP).
//
// Twelve requirements (issue 39; it had 32): the file's shape is one value (`BlockGeometry`), its modes one snapshot
// (`BlockStoreCondition`), and which version is cached, with how an answer is judged against it, is a seam of its
// own (`CachedVersion`), reached through `version`. What transfers call besides (`size`, `isStale`, `abandon`, ...)
// is derived from these in the extension below, so an implementation provides only the twelve.

/// What a request for blocks found.
package enum BlockAvailability {
    /// Every block is readable now.
    case ready
    /// The waiter runs when they arrive or one fails.
    case waiting
    /// Nothing will ever arrive for this version of the file.
    case failed(BlockFailure)
}

/// The modes of a cached file that transfers check, read together under one lock.
package struct BlockStoreCondition: Sendable, Equatable {
    /// Every block is present.
    var isComplete: Bool
    /// The file was replaced on the server: nothing more is put.
    var isStale: Bool
    /// The user paused the file's background downloads.
    var isPaused: Bool
    /// The process is shutting down: nothing more is fetched in the background.
    var isStopping: Bool
    /// A block could not be written lately (a full disk): background fill stops.
    var hasWriteFailure: Bool
    /// Its server ignores Range: the file comes as one whole-file stream.
    var isRangeless: Bool
}

/// A step of a whole-file stream, for a server that ignores Range.
package enum StreamStep {
    /// The server ignores Range for this file: from now on it is streamed whole.
    case markRangeless
    /// Claims every absent block for one stream; answers false if a stream runs already (or none is needed).
    case begin
    /// The stream ended.
    case end
    /// The body of a file of unknown size ended after `size` bytes; `lastBlock` is what came after its last whole
    /// block. The entry is settled at that size (CacheStore+SettledSize.swift), after which it is stale.
    case ended(size: UInt64, lastBlock: [UInt8])
    /// The body of a file of unknown size is longer than the entry's capacity: the entry is rewritten with room
    /// for more, after which it is stale. `next` gets the entry with more room (nil if it could not be made), into
    /// which the same stream goes on: its transfer waits meanwhile, paused, and nothing is asked for twice.
    case outgrew(next: @Sendable ((any BlockStore)?) -> Void)
}

/// Which version of the remote file is cached, and how an answer is judged against it (RotatingETags.swift).
package protocol CachedVersion: AnyObject, Sendable {
    /// The version cached, as `matches` compares it.
    var remoteMetadata: RemoteMetadata { get }
    /// Whether the cached version is the one `metadata` describes.
    func matches(_ metadata: RemoteMetadata) -> Bool
    /// Judges an answer that differs from the cached version only by its ETag.
    func judgeETag(_ etag: String) -> ETagVerdict
    /// An answer for the cached version's own validator arrived.
    func noteOwnAnswer()
    /// The cached version's server rotates its ETags: from now on length and Last-Modified tell its version.
    /// Returns the server's origin the first time it is found to rotate, to say so once.
    @discardableResult
    func retireETag() -> String?
}

/// One cached file, as the transfers that fill it see it.
package protocol BlockStore: AnyObject, Sendable {
    /// 1. The file's shape: its size and how it is cut into blocks.
    var geometry: BlockGeometry { get }
    /// 2. Which version is cached, and how answers are judged against it.
    var version: any CachedVersion { get }
    /// 3. Its modes, read together.
    var condition: BlockStoreCondition { get }
    /// 4. Who uses the file (EntryUse.swift): whether a live process does (a READ of a process that still exists
    /// waits on it, or, when no READ waits, a handle is open on it; this looks for processes, which costs system
    /// calls), and the work queued or running for it, which the fetching side counts there (`addWork`) so that the
    /// store keeps the entry open meanwhile without asking anyone above it.
    var use: EntryUse { get }
    /// 5. The CRC32C written with block `index` when it is present, nil when it is not: a whole-file stream that
    /// passes a present block checks that it brings the same bytes (a server without Range cannot skip it).
    func presentChecksum(ofBlock index: Int) -> UInt32?

    // Claims: blocks marked in flight, so that no two transfers bring the same block.
    /// 6. Makes sure `blocks` will be readable: says so if they are, or can never be (`whenReady` is then not
    /// called); otherwise `whenReady` runs once they all arrive or one fails, and `claimed` receives the runs that
    /// nobody was fetching yet, now claimed: the caller fetches them.
    func request(blocks: Range<Int>, claimed: inout [Range<Int>], whenReady: @escaping BlockWaiter) -> BlockAvailability
    /// 7. Claims the absent, unclaimed blocks of `blocks` and returns them as runs (readahead, fill).
    func claim(blocks: Range<Int>) -> [Range<Int>]
    /// 8. Background fill's next run: the absent, unclaimed blocks at or after `cursor` (wrapping once), at most
    /// `limit` long, now claimed, with the cursor for the next call; or `.noRoom` when the cache cap leaves no
    /// room to complete the file (CacheEntry+FillPass.swift). `newPass`: the file's fill was just asked for.
    func claimFillRun(from cursor: Int, limit: Int, newPass: Bool) -> FillClaim
    /// 9. Gives the claims on `blocks` back: with `failing`, their waiting readers get it (the blocks will not
    /// come); without, they go on waiting (another transfer brings them).
    func release(_ blocks: Range<Int>, failing: BlockFailure?)

    // Putting blocks.
    /// 10. An empty buffer for one block of `capacity` bytes, from the store's pool.
    func makeBuffer(capacity: Int) -> BlockBuffer
    /// 11. Takes a whole received block: its readers are answered, and it is written to the cache. `background`
    /// (fill) blocks are written without the page cache; `budgeted` ones wait for memory when the writer lags.
    func put(block index: Int, buffer: BlockBuffer, background: Bool, budgeted: Bool)

    /// 12. A step of a whole-file stream (`begin` answers whether it began; `end` whether readers wait for blocks
    /// the stream passed, which another stream must bring; the others true).
    @discardableResult
    func stream(_ step: StreamStep) -> Bool
}

/// What transfers call, derived from the twelve.
extension BlockStore {
    package var size: UInt64 { geometry.size }
    func isPresent(_ index: Int) -> Bool { presentChecksum(ofBlock: index) != nil }
    package var blockSize: Int { geometry.blockSize }
    package var blockCount: Int { geometry.blockCount }
    package func length(ofBlock index: Int) -> Int { geometry.length(ofBlock: index) }
    package func byteRange(of blocks: Range<Int>) -> Range<UInt64> { geometry.byteRange(of: blocks) }

    /// What to send as If-Range for the version cached.
    package var validator: String? { version.remoteMetadata.ifRangeValidator }

    package var isComplete: Bool { condition.isComplete }
    package var isStale: Bool { condition.isStale }
    package var isPaused: Bool { condition.isPaused }
    package var isStopping: Bool { condition.isStopping }
    package var hasWriteFailure: Bool { condition.hasWriteFailure }
    package var isRangeless: Bool { condition.isRangeless }

    /// The claimed blocks of `blocks` will not come: their readers get `error`.
    package func abandon(blocks: Range<Int>, error: BlockFailure) { release(blocks, failing: error) }
    /// Gives claimed blocks back without failing their readers: another transfer brings them.
    package func releaseClaims(_ blocks: Range<Int>) { release(blocks, failing: nil) }

    package func markRangeless() { stream(.markRangeless) }
    /// Claims every absent block for one stream; false if a stream runs already.
    package func beginStream() -> Bool { stream(.begin) }
    /// Ends the stream; true when another must start for readers still waiting (see `stream`).
    package func endStream() -> Bool { stream(.end) }
}

extension CacheEntry: BlockStore, CachedVersion {
    package var version: any CachedVersion { self }

    package var condition: BlockStoreCondition {
        let stopping = ledger.stopping.load(ordering: .relaxed)
        return state.withLock { state in
            BlockStoreCondition(isComplete: state.blocks.present.isFull, isStale: state.stale, isPaused: state.paused,
                                isStopping: stopping, hasWriteFailure: state.memory.reportedWriteFailure,
                                isRangeless: state.rangeless)
        }
    }

    package func makeBuffer(capacity: Int) -> BlockBuffer { BlockBuffer(capacity: capacity, pool: pipeline.buffers) }

    /// Makes room for the block under the cap (counting it from now, so blocks on their way to the disk cannot
    /// overshoot it), hands it to the writer (`accept`), and once it is written records its use and counts it
    /// towards the next group commit, all through the ledger. A block that brings nothing new, or is never
    /// written, is given back to the cap. A fill's block makes room sparing what was used during its pass; if it
    /// cannot, the pass ends (CacheEntry+FillPass.swift).
    package func put(block index: Int, buffer: BlockBuffer, background: Bool, budgeted: Bool) {
        let length = buffer.count
        let passStart = background && ledger.maxBytes != nil ? fillPassStart : nil
        if !ledger.reserveRoom(for: length, sparing: passStart) { endFillPass(.outOfRoom(cap: ledger.maxBytes ?? 0)) }
        let accepted = accept(block: index, buffer: buffer, writeBackNow: background,
                              budgeted: budgeted) { [self] stored in
            guard stored else { return ledger.account(-length) }
            ledger.recordUse(self, blocks: index..<(index + 1))
            ledger.countTowardsCommit(length)
            ledger.noteStored(to: self)
        }
        if !accepted { ledger.account(-length) }
    }

    package func presentChecksum(ofBlock index: Int) -> UInt32? {
        state.withLock { state in state.blocks.present.contains(index) ? state.crcs[index] : nil }
    }

    package func release(_ blocks: Range<Int>, failing: BlockFailure?) {
        if let failing { abandonClaims(blocks, error: failing) } else { returnClaims(blocks) }
    }

    @discardableResult
    package func stream(_ step: StreamStep) -> Bool {
        switch step {
        case .markRangeless: setRangeless()
        case .begin: return beginWholeStream()
        case .end: return endWholeStream()
        case .ended(let size, let lastBlock): ledger.settleHook.withLock { $0 }?.settle(self, size, lastBlock, nil)
        case .outgrew(let next):
            guard let hook = ledger.settleHook.withLock({ $0 }) else {
                next(nil)
                return false
            }
            hook.settle(self, nil, [], next)
        }
        return true
    }
}
