// The filesystem, without FUSE: every operation the adapter forwards, on plain Swift types. The adapter copies the
// kernel's arguments in, calls one method here, and turns the result into a reply; everything worth testing is here.
//
// A read whose blocks are all present is answered at once from the data file. Otherwise the blocks nobody is
// fetching yet are requested at demand priority, and the reply is sent from the thread that stores the last
// needed block. Each open handle has its own readahead window, so two streams over one file do not confuse it.
//
// A handle reads the version of the file it was opened on. When a fetch finds that the remote file changed, the
// URL is probed again, the catalog takes the new size and date, the old entry goes stale, and the failed read is
// answered ESTALE only after that, so the next open already gets the new version (and, through `keepCache`, makes
// the kernel drop the old version's pages).

import Dispatch
import Glibc
import Logging
import Synchronization

/// Attributes of one file or of the root directory.
public struct FileAttributes: Sendable, Equatable {
    public var inode: UInt64
    public var isDirectory: Bool
    public var size: UInt64
    /// Bytes present locally; `st_blocks` is this divided by 512, rounded up.
    public var cachedBytes: UInt64
    /// Seconds since 1970.
    public var modificationTime: Int64
}

/// What a successful read hands back to the adapter.
public enum ReadReply: Sendable, Equatable {
    /// `count` bytes at `address`, inside the cache file's read-only mapping, all present: the kernel copies them
    /// into its reply (one copy, no buffer). The address is valid only while the reply callback runs, and only the
    /// kernel may read it (see `FileMapping`).
    case mapped(address: UInt, count: Int)
    /// `count` bytes at `offset` of the file behind `descriptor`, all present: reply straight from it (spliced
    /// where libfuse can); used when the file could not be mapped.
    case file(descriptor: Int32, offset: UInt64, count: Int)
    /// Pieces that follow each other in the file: some in the mapping (as in `mapped`), some in the buffers of
    /// blocks still in memory (just received, or unwritable because the cache disk is full).
    case segments([ReplySegment])
    /// The bytes themselves (when the file is not mapped and some came from memory).
    case bytes([UInt8])
}

/// One piece of a `.segments` reply: `count` bytes at `address`, inside `owner` (which keeps them alive until the
/// reply is sent) or, without an owner, inside the cache file's mapping.
public struct ReplySegment: Sendable, Equatable {
    public var address: UInt
    public var count: Int
    public var owner: BlockBuffer?
}

/// Which files rangefs completes in the background.
public enum PrefetchPolicy: String, Sendable, CaseIterable {
    /// Only what readers ask for, plus readahead for sequential readers.
    case none
    /// Every file once it has been opened; the fill goes on after it is closed, at low priority.
    case open
    /// Every mounted file, from the start.
    case all
}

/// What `open` hands back to the adapter.
public struct OpenedFile: Sendable, Equatable {
    public var handle: UInt64
    /// Whether pages the kernel cached for this inode are still valid. False after the remote file changed, so
    /// the kernel drops the old version's pages.
    public var keepCache: Bool
}

/// A mounted set of remote files, backed by a cache.
public final class RangeFS: Sendable {
    public let catalog: Catalog
    public let store: CacheStore
    public let scheduler: FetchScheduler
    /// Block size for entries created by this mount.
    public let blockSize: Int
    /// When the mount started, the root directory's time.
    public let mountTime: Int64
    /// The largest readahead window.
    public let readaheadMaximum: UInt64
    public let prefetch: PrefetchPolicy
    /// An open re-probes its URL in the background when the last check is older than this; nil never.
    public let revalidateAfter: Duration?
    /// When each URL was last checked against its server, as seconds on the monotonic clock.
    private let lastValidated = Mutex<[String: Double]>([:])
    private let handles = Mutex(Handles())
    /// The cache generation whose pages the kernel may hold, per inode.
    private let kernelGenerations = Mutex<[UInt64: UInt64]>([:])
    /// Status samples of stored bytes per entry (monotonic seconds, bytes), for download speeds.
    let speedSamples = Mutex<[String: (Double, UInt64)]>([:])
    /// Tells the kernel to forget a name (set by the FUSE adapter), after `rangefs rm`.
    public let entryInvalidator = LockedBox<(@Sendable (UInt64, String) -> Void)?>(nil)
    /// Tells the kernel to drop its cached pages of an inode in a byte range, and its attributes (set by the FUSE
    /// adapter); `UInt64.max` as the upper bound means to the end of the file. It waits for pages that a READ in
    /// flight holds, so it must never run where that READ's reply waits behind it.
    public let pageInvalidator = LockedBox<(@Sendable (UInt64, Range<UInt64>) -> Void)?>(nil)
    /// Byte ranges of READs being answered ESTALE on the revalidation queue, by inode: the kernel holds their pages
    /// locked until the reply, so the page invalidation that runs on that queue must leave them out.
    private let staleReplies = Mutex<[UInt64: [Range<UInt64>]]>([:])
    /// Where the second, complete page invalidation runs after a remote change (see `forgetKernelPages`).
    private let invalidationQueue = DispatchQueue(label: "rangefs.invalidate")
    /// Re-probes run here: they wait for the network, which the curl thread provides.
    private let revalidationQueue = DispatchQueue(label: "rangefs.revalidate")
    let logger: Logger

    private struct OpenFile {
        let inode: UInt64
        let entry: CacheEntry
        var readahead: ReadaheadWindow
        /// How far the cache file has been advised into the page cache for this reader.
        var diskReadaheadEnd: UInt64 = 0
        /// How far readahead has been claimed from the network for this reader.
        var networkReadaheadEnd: UInt64 = 0
    }

    private struct Handles {
        var next: UInt64 = 1
        var open: [UInt64: OpenFile] = [:]
    }

    public init(catalog: Catalog, store: CacheStore, scheduler: FetchScheduler, blockSize: Int,
                readaheadMaximum: UInt64 = 32 << 20, prefetch: PrefetchPolicy = .none,
                revalidateAfter: Duration? = nil, logger: Logger) {
        self.readaheadMaximum = readaheadMaximum
        self.prefetch = prefetch
        self.revalidateAfter = revalidateAfter
        self.catalog = catalog
        self.store = store
        self.scheduler = scheduler
        self.blockSize = blockSize
        self.logger = logger
        mountTime = Int64(time(nil))
        scheduler.observeRemoteChanges { [weak self] entry in self?.revalidate(entry, knownChanged: true) }
    }

    // MARK: Names and attributes

    public func lookup(parent: UInt64, name: String) -> Result<FileAttributes, FileSystemError> {
        guard parent == Catalog.rootInode else { return .failure(.notADirectory) }
        guard let item = catalog.item(named: name) else { return .failure(.notFound) }
        return attributes(of: item.inode)
    }

    public func attributes(of inode: UInt64) -> Result<FileAttributes, FileSystemError> {
        if inode == Catalog.rootInode {
            return .success(FileAttributes(inode: inode, isDirectory: true, size: 0, cachedBytes: 0,
                                           modificationTime: mountTime))
        }
        guard let item = catalog.item(inode: inode) else { return .failure(.notFound) }
        let cached = (try? entry(for: item).cachedBytes) ?? 0
        return .success(FileAttributes(inode: inode, isDirectory: false, size: item.metadata.size,
                                       cachedBytes: cached,
                                       modificationTime: item.metadata.modificationTime ?? mountTime))
    }

    /// The root directory's files, sorted by name.
    public func listDirectory(_ inode: UInt64) -> Result<[CatalogItem], FileSystemError> {
        guard inode == Catalog.rootInode else { return .failure(.notADirectory) }
        return .success(catalog.items)
    }

    // MARK: Open, read, release

    /// Opens a file for reading and returns its handle.
    public func open(_ inode: UInt64) -> Result<OpenedFile, FileSystemError> {
        if inode == Catalog.rootInode { return .failure(.isADirectory) }
        guard let item = catalog.item(inode: inode) else { return .failure(.notFound) }
        let cacheEntry: CacheEntry
        do {
            cacheEntry = try entry(for: item)
        } catch {
            logger.error("cannot open the cache for \(item.name): \(error)")
            return .failure(.io(error.description))
        }
        let handle = handles.withLock { handles in
            let handle = handles.next
            handles.next += 1
            handles.open[handle] = OpenFile(inode: inode, entry: cacheEntry, readahead: ReadaheadWindow(
                minimum: min(1 << 20, readaheadMaximum), maximum: readaheadMaximum))
            return handle
        }
        if prefetch == .open && !cacheEntry.isComplete { scheduler.fill(cacheEntry, url: item.metadata.url) }
        revalidateIfDue(cacheEntry)
        let generation = cacheEntry.header.generation
        let keepCache = kernelGenerations.withLock { known in
            defer { known[inode] = generation }
            return known[inode] == nil || known[inode] == generation
        }
        return .success(OpenedFile(handle: handle, keepCache: keepCache))
    }

    /// Whether any handle is open on `inode`.
    public func isOpen(_ inode: UInt64) -> Bool {
        handles.withLock { $0.open.values.contains { $0.inode == inode } }
    }

    public func release(_ handle: UInt64) {
        _ = handles.withLock { $0.open.removeValue(forKey: handle) }
    }

    /// Reads `count` bytes at `offset`; `reply` runs exactly once, now or when the blocks arrive.
    public func read(handle: UInt64, offset: UInt64, count: Int,
                     reply: @escaping @Sendable (Result<ReadReply, FileSystemError>) -> Void) {
        let opened = handles.withLock { handles -> (CacheEntry, UInt64, Range<UInt64>?, Range<UInt64>?)? in
            guard var file = handles.open[handle] else { return nil }
            let ahead = file.readahead.observe(offset: offset, count: count)
            let readEnd = min(file.entry.size, offset + UInt64(count))
            let windowEnd = min(file.entry.size, readEnd + ahead)
            // Fetch and read the cache file ahead in steps of half a window: one request per step of a sliding
            // window would be one small HTTP request per kernel READ.
            var networkAhead: Range<UInt64>?
            if ahead == 0 {
                file.networkReadaheadEnd = 0
            } else if file.networkReadaheadEnd < readEnd + ahead / 2 && windowEnd > readEnd {
                networkAhead = max(readEnd, file.networkReadaheadEnd)..<windowEnd
                file.networkReadaheadEnd = windowEnd
            }
            var diskAhead: Range<UInt64>?
            if ahead > 0 && windowEnd > file.diskReadaheadEnd + ahead / 2 {
                diskAhead = max(offset, file.diskReadaheadEnd)..<windowEnd
                file.diskReadaheadEnd = windowEnd
            }
            handles.open[handle] = file
            return (file.entry, file.inode, networkAhead, diskAhead)
        }
        guard let (entry, inode, networkAhead, diskAhead) = opened else { return reply(.failure(.badHandle)) }
        if let diskAhead { entry.prefetchFromDisk(diskAhead) }
        let end = min(entry.size, offset + UInt64(count))
        guard offset < end else {
            return reply(.success(.bytes([])))
        }
        let range = offset..<end
        let blocks = entry.blocks(covering: range)
        var claimed: [Range<Int>] = []
        let availability = entry.request(blocks: blocks, claimed: &claimed) { [weak self] result in
            switch result {
            case .success:
                self?.answer(handle: handle, entry: entry, range: range, reply: reply)
            case .failure(.remoteChanged):
                // Answer only once the new version is in the catalog, so the reader's next open gets it.
                guard let self else { return reply(.failure(.stale)) }
                staleReplies.withLock { $0[inode, default: []].append(range) }
                revalidationQueue.async {
                    self.revalidateNow(entry, knownChanged: true)
                    reply(.failure(.stale))
                    self.staleReplies.withLock { replies in
                        if let index = replies[inode]?.firstIndex(of: range) { replies[inode]!.remove(at: index) }
                        if replies[inode]?.isEmpty == true { replies[inode] = nil }
                    }
                }
            case .failure(let error):
                reply(.failure(Self.fileSystemError(for: error)))
            }
        }
        if !claimed.isEmpty {
            scheduler.fetch(entry, url: entry.header.url, runs: claimed, priority: .demand)
        }
        switch availability {
        case .ready: answer(handle: handle, entry: entry, range: range, reply: reply)
        case .waiting: scheduler.promote(entry, blocks: blocks)
        case .failed(let error): reply(.failure(Self.fileSystemError(for: error)))
        }
        if let networkAhead, !networkAhead.isEmpty {
            let runs = entry.claim(blocks: entry.blocks(covering: networkAhead))
            if !runs.isEmpty { scheduler.fetch(entry, url: entry.header.url, runs: runs, priority: .readahead) }
        }
    }

    /// Sends the bytes of a read whose blocks are readable; if a memory-only block was dropped meanwhile, asks
    /// for the read again (it will be fetched again).
    private func answer(handle: UInt64, entry: CacheEntry, range: Range<UInt64>,
                        reply: @escaping @Sendable (Result<ReadReply, FileSystemError>) -> Void) {
        let blocks = entry.blocks(covering: range)
        store.recordUse(entry, blocks: blocks)
        // The reply reads the data file after this returns to the adapter; until it is sent, eviction keeps out.
        entry.beginServing(blocks)
        defer { entry.endServing(blocks) }
        if let bytes = entry.reply(for: range) {
            reply(.success(bytes))
        } else {
            read(handle: handle, offset: range.lowerBound, count: Int(range.count), reply: reply)
        }
    }

    /// Starts completing every mounted file in the background (`--prefetch=all`).
    public func fillAll() {
        for item in catalog.items {
            do {
                let cacheEntry = try entry(for: item)
                if !cacheEntry.isComplete { scheduler.fill(cacheEntry, url: item.metadata.url) }
            } catch {
                logger.error("cannot open the cache for \(item.name): \(error)")
            }
        }
    }

    // MARK: Remote changes

    /// Re-probes the URL of `entry` in the background if its last check is older than `revalidateAfter`, so that a
    /// file read only from the cache still notices a change on the server (close-to-open, with that much lag).
    private func revalidateIfDue(_ entry: CacheEntry) {
        guard let revalidateAfter else { return }
        let limit = Double(revalidateAfter.components.seconds) + Double(revalidateAfter.components.attoseconds) / 1e18
        let now = Self.monotonicSeconds()
        let due = lastValidated.withLock { checked in
            let url = entry.header.url
            if let last = checked[url], now - last < limit { return false }
            checked[url] = now
            return true
        }
        if due { revalidate(entry, knownChanged: false) }
    }

    /// Records that `url` was just checked (at mount, by the probe).
    public func markValidated(_ url: String) {
        lastValidated.withLock { $0[url] = Self.monotonicSeconds() }
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Re-probes the URL of `entry` in the background; see `revalidateNow`.
    func revalidate(_ entry: CacheEntry, knownChanged: Bool) {
        revalidationQueue.async { self.revalidateNow(entry, knownChanged: knownChanged) }
    }

    /// Probes the URL of `entry` again. If the server now describes other content, the catalog takes the new
    /// metadata, the old entry goes stale and a fresh one is opened for the new version. `knownChanged` says a
    /// fetch already saw another version: then the entry goes stale even if the probe cannot reach the server.
    private func revalidateNow(_ entry: CacheEntry, knownChanged: Bool) {
        markValidated(entry.header.url)
        let url = entry.header.url
        guard let item = catalog.items.first(where: { $0.metadata.url == url }),
              item.metadata.describesSameContent(as: entry.header.remoteMetadata)
        else {
            entry.markStale()  // already replaced by an earlier revalidation
            return
        }
        /// Marks the entry stale; the kernel then forgets the old version's pages, so that old handles get ESTALE
        /// even where the kernel had cached pages.
        func markStale() {
            if entry.markStale() { forgetKernelPages(of: item.inode) }
        }
        switch scheduler.fetcher.probeAll([url])[0] {
        case .success(let fresh) where !fresh.describesSameContent(as: entry.header.remoteMetadata):
            logger.notice("\(Redaction.redact(url)) changed on the server; open handles of the old version get ESTALE")
            catalog.update(inode: item.inode, metadata: fresh)
            markStale()
            do {
                let replacement = try store.entry(for: fresh, blockSize: blockSize)
                scheduler.stopFilling(entry)
                if prefetch == .all { scheduler.fill(replacement, url: url) }
            } catch {
                logger.error("cannot open the cache for the new version of \(item.name): \(error)")
            }
        case .success:
            if knownChanged { markStale() }  // changed and changed back: the old bytes cannot be trusted
        case .failure(.httpStatus(let status)) where status == 404 || status == 410:
            logger.warning("\(Redaction.redact(url)) is gone from the server (HTTP \(status))")
            markStale()
        case .failure(let error):
            logger.info("cannot check \(Redaction.redact(url)) against its server: \(error.userMessage)")
            // Unreachable: unless a fetch saw another version, keep serving what is cached.
            if knownChanged { markStale() }
        }
    }

    /// Makes the kernel drop its cached pages (and attributes) of `inode` after its entry went stale. The kernel
    /// serves cached pages without asking, so without this an old handle would go on reading them. Runs on the
    /// revalidation queue, where the ESTALE replies of the READs that found the change wait: their pages stay
    /// locked until then, so those ranges are left out here (they are not cached anyway: the READs fail), and a
    /// second, complete pass runs on its own queue for whatever was in flight meanwhile.
    private func forgetKernelPages(of inode: UInt64) {
        guard let invalidate = pageInvalidator.withLock({ $0 }) else { return }
        let page: UInt64 = 4096
        let held = staleReplies.withLock { $0[inode] ?? [] }
            .map { ($0.lowerBound / page * page)..<(($0.upperBound + page - 1) / page * page) }
            .sorted { $0.lowerBound < $1.lowerBound }
        var start: UInt64 = 0
        for range in held {
            if range.lowerBound > start { invalidate(inode, start..<range.lowerBound) }
            start = max(start, range.upperBound)
        }
        invalidate(inode, start..<UInt64.max)
        invalidationQueue.async { invalidate(inode, 0..<UInt64.max) }
    }

    static func fileSystemError(for error: FetchError) -> FileSystemError {
        switch error {
        case .remoteChanged: .stale
        default: .io(error.userMessage)
        }
    }

    // MARK: Extended attributes

    public static let attributeNames = [
        "user.rangefs.url", "user.rangefs.state", "user.rangefs.progress", "user.rangefs.cached_bytes",
        "user.rangefs.etag",
    ]

    public func extendedAttributeNames(of inode: UInt64) -> Result<[String], FileSystemError> {
        if inode == Catalog.rootInode { return .success([]) }
        guard catalog.item(inode: inode) != nil else { return .failure(.notFound) }
        return .success(Self.attributeNames)
    }

    public func extendedAttribute(_ name: String, of inode: UInt64) -> Result<String, FileSystemError> {
        guard let item = catalog.item(inode: inode) else {
            return .failure(inode == Catalog.rootInode ? .noSuchAttribute : .notFound)
        }
        let cached = (try? entry(for: item).cachedBytes) ?? 0
        let size = item.metadata.size
        switch name {
        case "user.rangefs.url": return .success(Redaction.redact(item.metadata.url))
        case "user.rangefs.etag": return .success(item.metadata.etag)
        case "user.rangefs.cached_bytes": return .success(String(cached))
        case "user.rangefs.progress": return .success(Self.percent(cached, of: size))
        case "user.rangefs.state":
            return .success(cached == size ? "complete" : cached == 0 ? "empty" : "partial")
        default: return .failure(.noSuchAttribute)
        }
    }

    /// `cached` of `size` as a percentage with one decimal, e.g. "42.5%"; an empty file is "100.0%".
    public static func percent(_ cached: UInt64, of size: UInt64) -> String {
        guard size > 0 else { return "100.0%" }
        let tenths = cached * 1000 / size
        return "\(tenths / 10).\(tenths % 10)%"
    }

    // MARK: Cache entries

    /// The cache entry of `item`, opened on first use so that mounting does no work per cached file.
    public func entry(for item: CatalogItem) throws(CacheError) -> CacheEntry {
        try store.entry(for: item.metadata, blockSize: blockSize)
    }
}
