// The seam between Fetch and Cache: all that fetching needs of one cached file. Fetch claims blocks, puts the
// blocks it receives, and fails the ones it cannot bring, through this protocol alone; it never sees a data file,
// a CRC or the store. `CacheEntry` is the one implementation (and the cache knows nothing of HTTP).

/// What a request for blocks found.
enum BlockAvailability {
    /// Every block is readable now.
    case ready
    /// The waiter runs when they arrive or one fails.
    case waiting
    /// Nothing will ever arrive for this version of the file.
    case failed(BlockFailure)
}

/// One cached file, as the transfers that fill it see it.
protocol BlockStore: AnyObject, Sendable {
    // The file's shape and version.
    var size: UInt64 { get }
    var blockSize: Int { get }
    var blockCount: Int { get }
    func length(ofBlock index: Int) -> Int
    func byteRange(of blocks: Range<Int>) -> Range<UInt64>
    /// What to send as If-Range for the version cached.
    var validator: String? { get }
    /// Whether the cached version is the one `metadata` describes.
    func matches(_ metadata: RemoteMetadata) -> Bool
    /// Judges an answer that differs from the cached version only by its ETag (see RotatingETags.swift).
    func judgeETag(_ etag: String) -> ETagVerdict
    /// An answer for the cached version's own validator arrived.
    func noteOwnAnswer()
    /// The cached version's server rotates its ETags: from now on length and Last-Modified tell its version.
    /// Returns the server's origin the first time it is found to rotate, to say so once.
    @discardableResult
    func retireETag() -> String?
    /// The version cached, as `matches` compares it.
    var remoteMetadata: RemoteMetadata { get }

    // Which blocks are readable, and whether to go on.
    func isPresent(_ index: Int) -> Bool
    var isComplete: Bool { get }
    /// The file was replaced on the server: nothing more is put.
    var isStale: Bool { get }
    /// The user paused the file's background downloads.
    var isPaused: Bool { get }
    /// The process is shutting down: nothing more is fetched in the background.
    var isStopping: Bool { get }
    /// A live process uses the file: a READ of a process that still exists waits on it, or, when no READ waits,
    /// a handle is open on it.
    var hasLiveUse: Bool { get }
    /// A block could not be written lately (a full disk): background fill stops.
    var hasWriteFailure: Bool { get }

    // Claims: blocks marked in flight, so that no two transfers bring the same block.
    /// Makes sure `blocks` will be readable: says so if they are, or can never be (`whenReady` is then not
    /// called); otherwise `whenReady` runs once they all arrive or one fails, and `claimed` receives the runs that
    /// nobody was fetching yet, now claimed: the caller fetches them.
    func request(blocks: Range<Int>, claimed: inout [Range<Int>], whenReady: @escaping BlockWaiter) -> BlockAvailability
    /// Claims the absent, unclaimed blocks of `blocks` and returns them as runs (readahead, fill).
    func claim(blocks: Range<Int>) -> [Range<Int>]
    /// The next run of absent, unclaimed blocks at or after `cursor` (wrapping once), at most `limit` long,
    /// now claimed, with the cursor for the next call.
    func claimNextRun(from cursor: Int, limit: Int) -> (Range<Int>, Int)?
    /// Gives claimed blocks back without failing their readers: another transfer brings them.
    func releaseClaims(_ blocks: Range<Int>)

    // Putting and failing blocks.
    /// An empty buffer for one block of `capacity` bytes, from the store's pool.
    func makeBuffer(capacity: Int) -> BlockBuffer
    /// Takes a whole received block: its readers are answered, and it is written to the cache. `background`
    /// (fill) blocks are written without the page cache; `budgeted` ones wait for memory when the writer lags.
    func put(block index: Int, buffer: BlockBuffer, background: Bool, budgeted: Bool)
    /// The claimed blocks of `blocks` will not come: their readers get `error`.
    func abandon(blocks: Range<Int>, error: BlockFailure)

    // Servers that ignore Range: the file comes as one whole-file stream.
    var isRangeless: Bool { get }
    func markRangeless()
    /// Claims every absent block for one stream; false if a stream runs already.
    func beginStream() -> Bool
    func endStream()
}

extension CacheEntry: BlockStore {
    var isStopping: Bool { store?.stopping.load(ordering: .relaxed) ?? false }

    func makeBuffer(capacity: Int) -> BlockBuffer { BlockBuffer(capacity: capacity, pool: pipeline.buffers) }

    func put(block index: Int, buffer: BlockBuffer, background: Bool, budgeted: Bool) {
        if let store {
            store.accept(block: index, of: self, buffer: buffer, writeBackNow: background, budgeted: budgeted)
        } else {
            _ = accept(block: index, buffer: buffer, writeBackNow: background, budgeted: budgeted)
        }
    }
}
