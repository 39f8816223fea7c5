// One remote file's local copy (format in CacheFormat.swift). This file holds the entry's state and the reading
// side: asking for blocks, claiming them for transfers, and failing readers. The rest is split by concern:
//   CacheEntry+Reply         how a read's bytes are handed to the kernel (mapping, buffers, file);
//   CacheEntry+Writing       a fetched block's way to the data file, and the memory fallback of a full disk;
//   CacheEntry+Commit        the group commit that makes present blocks durable;
//   CacheEntry+Verification  CRC checks of blocks that come from an earlier run;
//   CacheEntry+Digest        the end-to-end digest of the complete file, and its recorded verdict;
//   CacheEntry+Eviction      what the store's LRU eviction may take (see StoreLedger+Eviction).
// Which blocks are present, in memory, claimed or awaited is decided by the pure `BlockTable`.
//
// Durability order (DESIGN.md §3): a block is written and its CRC written in the meta block's table, then it
// becomes present. A later group commit takes a snapshot of the present set, flushes the data and the CRC table,
// and only then writes the snapshot to the meta block's inactive slot. So a bit never reaches the disk before its
// data.
//
// When the remote file changes, the entry becomes stale: its waiters and every later read fail with
// `.replaced`, and the store opens a fresh entry (in new files) for the new version.
//
// Locks: `state` is the innermost lock of the cache (see CacheStore.swift for the whole order). Under it run only
// the table's decisions and, for eviction, one fallocate.

import Dispatch
import Glibc
import Logging
import RangeFSSystem
import Synchronization

/// The local copy of one remote file.
/// More than 12 stored properties: the one object per cached file that every path meets at: its files and descriptors
/// (8, fixed at its open), its header and block geometry, the atomics every READ asks without the lock (digest failed,
/// direct writes, ETag retired, confirmed, header durable, committed sequence), its state under the lock and the commit
/// lock. Its behaviour is in the extensions (CacheEntry+*.swift); what is not about one file went out (EntryUse,
/// StoreLedger).
package final class CacheEntry: Sendable {
    package let header: CacheHeader
    /// Where the entry's files are (EntryFiles.swift).
    let files: EntryFiles
    /// The entry's name in messages and tables: its small file, or the stem of its `.data` and `.meta`.
    package var directory: String { files.base }
    /// Whether the entry is one file (data, meta block, footer): never passed through (CacheFormat.swift).
    let isSmall: Bool
    /// Where the meta block's parts lie, from `metaOffset` in `metaFile`.
    let metaLayout: MetaLayout
    let metaOffset: UInt64
    /// The sequence of the newest valid slot on disk (0: none); the next commit writes sequence + 1.
    let committedSequence: Atomic<UInt64>
    package let geometry: BlockGeometry
    /// What this entry shares with the store that opened it and its other entries (StoreLedger.swift): `put`
    /// makes room and counts a block through it. The entry holds no reference to its store.
    let ledger: StoreLedger
    // The files hold no descriptor while idle: each call borrows one from the store's pool.
    let dataFile: PooledFile
    /// The file of the meta block: the data file itself for a small entry, the `.meta` file for a large one.
    let metaFile: PooledFile
    /// The data file opened with O_DIRECT, for whole blocks.
    let directFile: PooledFile
    /// Cleared when a direct write fails (or the file system refuses O_DIRECT), after which every block is written
    /// through the page cache.
    let directWrites: Atomic<Bool>
    /// Set once the data is known to be wrong: its digest mismatched again after a refetch (CacheEntry+Digest).
    /// An atomic, so that every READ can ask without a lock.
    let failedDigest: Atomic<Bool>
    /// Set once the server's ETags are found to rotate (see `retireETag`).
    let etagRetired = Atomic(false)
    /// A later moment the server answered with this version than its header's, once an answer confirmed it
    /// (`noteAnswered`); 0 for none.
    let confirmedAt = Atomic<Int64>(0)
    /// The data file mapped read-only, so replies are copied by the kernel straight from the page cache. Nil for a
    /// small entry (see `init`), whose replies are read with pread.
    let mapping: FileMapping?
    let pipeline: BlockPipeline
    package let state: LockedBox<State>
    /// Serialises commits so that an older snapshot never replaces a newer one. Taken before `state`; a group
    /// commit holds those of all the entries it covers (CacheStore+Commit).
    let commitLock = ExclusiveLock()
    /// Whether the entry's files and header record are known durable. A new entry's files are written without a
    /// flush: the commit that first writes a slot flushes them first (a header without a valid slot claims
    /// nothing).
    let headerDurable: Atomic<Bool>
    /// Who uses the entry: its open handles, its last activity, the processes whose READs wait on it.
    package let use = EntryUse()
    let logger: Logger



    /// More than 12 stored properties: what the entry's one lock guards: the block table and everything decided
    /// together with it (what is unwritten, in memory, stale, paused, failing). Split in two, a read's decision would
    /// take two locks, in an order to keep.
    package struct State {
        var blocks: BlockTable
        var crcs: [UInt32]
        /// Blocks received and waiting for the writer (in flight and in memory, not yet present).
        var unwritten: [Int: Unwritten] = [:]
        /// Whether the writer has this entry's unwritten blocks in hand.
        var writeScheduled = false
        var memory = MemoryBlocks()
        /// The present set changed since the last commit.
        var changedSinceCommit = false
        var eviction: EvictionMarks
        /// The remote file changed: this entry serves nothing more.
        var stale = false
        /// The server ignores Range: blocks come from one whole-file stream.
        var rangeless = false
        /// A whole-file stream is running.
        package var streaming = false
        /// The user paused this file's downloads (`rangefs pause`).
        var paused = false
        /// Why the last fetch failed, until one succeeds.
        var lastError: String?
        /// Blocks whose fetch failed lately, when, and why (see `failureMemory`).
        var recentFailures: [(blocks: Range<Int>, at: ContinuousClock.Instant, error: BlockFailure)] = []
        /// Bytes stored since the entry was opened.
        var storedBytes: UInt64 = 0
        /// How fast they came lately, for status.
        var storeRate = TransferRate()
        /// The verdict of the end-to-end check of this version (CacheEntry+Digest.swift).
        var digest: DigestRecord?
        /// Every block was dropped for a refetch: the next commit of a full set is a completion again, even if no
        /// commit saw the file incomplete in between.
        var refetching = false
        /// The first other ETag an answer brought for this version's length and date, and whether an answer for
        /// this version's own validator came after it (CacheEntry+Validators).
        var otherETag: String?
        var ownAnswerSinceOther = false
        /// Readers of a file of unknown size waiting past the entry's capacity: answered with success when the
        /// entry is reshaped (grown or settled: it goes stale), or with the failure of its stream.
        var reshapeWaiters: [BlockWaiter] = []
        /// Stale because the store reshaped it (its stream ended or outgrew it), not because the file changed.
        var reshaped = false
    }

    /// Where an entry's files are and what its meta block says, for `CacheEntry.init`.
    struct Location {
        var files: EntryFiles
        var isSmall: Bool
        var metaLayout: MetaLayout
        var metaOffset: UInt64
        /// The sequence of the newest valid slot (0: none).
        var sequence: UInt64
    }

    init(header: CacheHeader, location: Location, dataFile: PooledFile, metaFile: PooledFile,
         durable: BlockBitmap, crcs: [UInt32], digest: DigestRecord? = nil, headerDurable: Bool = true,
         ledger: StoreLedger, pipeline: BlockPipeline, logger: Logger) {
        self.header = header
        self.headerDurable = Atomic(headerDurable)
        self.ledger = ledger
        files = location.files
        isSmall = location.isSmall
        metaLayout = location.metaLayout
        metaOffset = location.metaOffset
        committedSequence = Atomic(location.sequence)
        geometry = BlockGeometry(blockSize: header.blockSize, size: header.size)
        self.dataFile = dataFile
        self.metaFile = metaFile
        // A small entry is not mapped. Its file is read in one or a few READs, so a mapping's costs were per
        // file, not per byte: an mmap at every open (and an munmap at release), page faults as its one reply was
        // copied, and an madvise per reply dropping the pages again, which took the address space's lock for
        // writing and sent the other CPU a TLB shootdown (issue 46: 4-7% of the daemon's CPU over 3,000 small
        // files, cold or after a remount). Its replies are read with pread instead (CacheEntry+Reply).
        mapping = location.isSmall ? nil : FileMapping(file: dataFile, count: Int(header.size))
        directFile = dataFile.pool.file(path: dataFile.path, flags: O_WRONLY | FileSystemCalls.directFlag)
        directWrites = Atomic(true)
        failedDigest = Atomic(digest?.verdict == .mismatch)
        self.pipeline = pipeline
        self.logger = logger
        state = LockedBox(State(blocks: BlockTable(durable: durable), crcs: crcs,
                            eviction: EvictionMarks(blockCount: header.blockCount), digest: digest))
        // A file without a length can only be read from its first byte: one whole-file stream brings its blocks.
        if !header.sizeKnown { setRangeless() }
    }

    // MARK: Use

    /// Whether the entry could be dropped and loaded again from its files without losing anything: nobody holds
    /// it, nothing is awaited, in flight, unwritten or uncommitted, and it is not pinned, paused or streaming.
    var isIdle: Bool {
        guard !use.isHeld else { return false }
        return state.withLock { state in
            state.blocks.isQuiet && state.unwritten.isEmpty && !state.writeScheduled && !state.changedSinceCommit
                && !state.streaming && !state.paused && !state.eviction.pinned && !state.stale
        }
    }

    // MARK: Geometry

    var blockSize: Int { header.blockSize }
    var blockCount: Int { header.blockCount }
    package var size: UInt64 { header.size }

    /// The file that holds the data, at the remote file's offsets.
    package var dataPath: String { dataFile.path }

    /// The file the kernel may read a passthrough handle from: a large entry's data file; nil for a small entry,
    /// whose file goes on past the data with its meta block (the kernel bounds such a read by the backing file's
    /// own size, not the size rangefs reports).
    package var passthroughPath: String? { isSmall ? nil : dataFile.path }

    /// Where block `index`'s CRC lies in `metaFile`.
    func crcOffset(ofBlock index: Int) -> UInt64 {
        metaOffset + UInt64(metaLayout.crcTableOffset) + UInt64(index) * 4
    }

    /// The blocks that hold the bytes `range`.
    package func blocks(covering range: Range<UInt64>) -> Range<Int> { geometry.blocks(covering: range) }

    /// The bytes of `blocks`, clipped to the file's end.
    package func byteRange(of blocks: Range<Int>) -> Range<UInt64> { geometry.byteRange(of: blocks) }

    /// The length of block `index` (the last one may be short).
    func length(ofBlock index: Int) -> Int { geometry.length(ofBlock: index) }

    // MARK: Progress

    /// How many bytes are present locally.
    package var cachedBytes: UInt64 { geometry.bytes(in: state.withLock { $0.blocks.present }) }

    package var isComplete: Bool { state.withLock { $0.blocks.present.isFull } }

    /// A copy of the present set, for status displays and tests.
    package var presentBlocks: BlockBitmap { state.withLock { $0.blocks.present } }

    func isPresent(_ index: Int) -> Bool { state.withLock { $0.blocks.present.contains(index) } }

    /// Bytes stored since the entry was opened.
    var storedBytes: UInt64 { state.withLock { $0.storedBytes } }

    /// Bytes stored per second over the last few seconds (TransferRate).
    package var recentRate: Double {
        let now = MonotonicClock.seconds()
        return state.withLock { $0.storeRate.rate(at: now) }
    }

    /// Why the last fetch failed, until one succeeds.
    package var lastError: String? { state.withLock { $0.lastError } }

    // MARK: Asking for blocks

    /// How long a block whose fetch failed counts as failed lately (see `recentFailure`).
    static let failureMemory: Duration = .seconds(2)

    /// Why the fetch of an unreadable block of `blocks` failed, if that was less than `failureMemory` ago. When a
    /// READ fails, the kernel asks again at once for its first page. That second READ must not start a second
    /// round of retries against a server that does not answer (it made one read of a hung origin take twice the
    /// retries' time): after a timeout it fails at once, and after another failure it gets one attempt, so a
    /// server that is back answers it.
    package func recentFailure(_ blocks: Range<Int>) -> BlockFailure? {
        state.withLock { state in
            guard !state.recentFailures.isEmpty else { return nil }
            let now = ContinuousClock.now
            state.recentFailures.removeAll { now - $0.at > Self.failureMemory }
            return state.recentFailures.last { failure in
                failure.blocks.overlaps(blocks)
                    && failure.blocks.clamped(to: blocks).contains { !state.blocks.isReadable($0) }
            }?.error
        }
    }

    /// Makes sure `blocks` will be readable. If they already are, or can never be, says so (`whenReady` is then
    /// not called). Otherwise `whenReady` runs once they all arrive or one fails, and `claimed` receives the runs of
    /// blocks that nobody was fetching yet, now marked in flight: the caller must fetch them.
    package func request(blocks: Range<Int>, claimed: inout [Range<Int>],
                        whenReady: @escaping BlockWaiter) -> BlockAvailability {
        verifyLoadedBlocks(blocks)
        return state.withLock { state in
            if state.stale { return .failed(.replaced) }
            switch state.blocks.request(blocks, waiter: whenReady) {
            case .ready: return .ready
            case .waiting(let runs):
                claimed = runs
                return .waiting
            }
        }
    }

    /// Marks the absent, unclaimed blocks of `blocks` in flight and returns them as runs; for readahead and fill.
    package func claim(blocks: Range<Int>) -> [Range<Int>] {
        state.withLock { state in state.stale ? [] : state.blocks.claim(blocks) }
    }

    /// Releases the claim on the absent blocks of `blocks` and fails every reader waiting for one of them.
    func abandonClaims(_ blocks: Range<Int>, error: BlockFailure) {
        let failed = state.withLock { state -> [BlockWaiter] in
            switch error {
            case .cancelled:
                break
            case .replaced:
                state.lastError = "the remote file changed"
            case .failed(_, let message):
                state.lastError = message
                let now = ContinuousClock.now
                state.recentFailures.removeAll { now - $0.at > Self.failureMemory }
                state.recentFailures.append((blocks, now, error))
            }
            // A failed stream of a file of unknown size fails the readers waiting past its capacity too.
            let pastCapacity = header.sizeKnown ? [] : state.reshapeWaiters
            if !header.sizeKnown { state.reshapeWaiters.removeAll() }
            return state.blocks.abandon(blocks) + pastCapacity
        }
        for resume in failed { resume(.failure(error)) }
    }

    /// Releases the claim on `blocks` without failing their readers; another transfer will bring them.
    func returnClaims(_ blocks: Range<Int>) {
        state.withLock { $0.blocks.releaseClaims(blocks) }
    }

    // MARK: Versions and modes

    /// Marks this version of the file as replaced: every waiting reader fails with `.replaced`, and so
    /// does every later request. Returns false if it already was stale.
    @discardableResult
    package func markStale() -> Bool {
        let (failed, reshaped, changed) = state.withLock { state -> ([BlockWaiter], [BlockWaiter], Bool) in
            guard !state.stale else { return ([], [], false) }
            state.stale = true
            for index in state.memory.removeAll() { state.blocks.droppedFromMemory(index) }
            defer { state.reshapeWaiters.removeAll() }
            return (state.blocks.removeAllWaiters(), state.reshapeWaiters, true)
        }
        for resume in failed { resume(.failure(.replaced)) }
        for resume in reshaped { resume(.success(())) }
        return changed
    }

    /// Makes the entry stale because the store reshaped it into another (CacheStore+SettledSize.swift): its readers
    /// read the new one (`wasReshaped`), where a stale entry's would get ESTALE.
    func markReshaped() {
        state.withLock { $0.reshaped = true }
        markStale()
    }

    /// Whether the entry went stale for a reshape, not for a change of the remote file.
    package var wasReshaped: Bool { state.withLock { $0.reshaped } }

    /// A reader of a file of unknown size past this entry's capacity waits for the entry to be reshaped (it goes
    /// stale, answered with success) or for its stream to fail; false, with `waiter` not kept, when it is stale
    /// already.
    package func whenReshaped(_ waiter: @escaping BlockWaiter) -> Bool {
        state.withLock { state in
            guard !state.stale else { return false }
            state.reshapeWaiters.append(waiter)
            return true
        }
    }

    package var isStale: Bool { state.withLock { $0.stale } }




    /// Whether the user paused this file's downloads.
    package var isPaused: Bool { state.withLock { $0.paused } }
    package func setPaused(_ paused: Bool) { state.withLock { $0.paused = paused } }

    /// Whether the server ignores Range for this file, so it must be streamed whole.
    var isRangeless: Bool { state.withLock { $0.rangeless } }
    func setRangeless() { state.withLock { $0.rangeless = true } }

    /// Claims every absent block for one whole-file stream, unless a stream is already running.
    /// Returns false when one is.
    func beginWholeStream() -> Bool {
        state.withLock { state in
            // A complete entry needs no stream: a Range request answered with the whole file after another
            // stream completed it must not start the file over.
            // An entry of unknown size is never complete: full, its stream must bring the bytes past its capacity
            // (a stream that died there would otherwise leave its readers waiting for ever).
            guard !state.streaming, !state.stale, !state.blocks.present.isFull || !header.sizeKnown else { return false }
            state.streaming = true
            state.blocks.claimAllAbsent()
            return true
        }
    }

    /// Ends the whole-file stream; returns whether readers wait for blocks it passed that the cap evicted since
    /// (then another stream must bring them: nothing else will, and they would wait for ever).
    func endWholeStream() -> Bool {
        state.withLock { state in
            state.streaming = false
            return !state.stale && state.blocks.waitsForUnclaimedBlocks
        }
    }
}
