// Folder FileSystem/: the file system's operations, open handles, revalidation and directory listings; the
// composition of everything below it. It may use Fetch/, Cache/, Catalog/ and System/; the FUSE adapter uses it.
//
// The filesystem, without FUSE: every operation the adapter forwards, on plain Swift types. The adapter copies the
// kernel's arguments in, calls one method here, and turns the result into a reply; everything worth testing is here.
//
// How one read travels: the handle's ReadPlanner observes it once and plans readahead; the entry's block table
// says whether its blocks are readable. If they are, the reply comes at once from the data file. Otherwise the
// blocks nobody is fetching yet are claimed and requested at demand priority, and the reply is sent from the
// thread that receives the last needed block. Each open handle has its own planner, so two streams over one file
// do not confuse each other's readahead.
//
// A handle reads the version of the file it was opened on. When a fetch finds that the remote file changed, the
// URL is probed again, the catalog takes the new size and date, the old entry goes stale, and the failed read is
// answered ESTALE only after that, so the next open already gets the new version (and, through `keepCache`, makes
// the kernel drop the old version's pages).

import Dispatch
import Glibc
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSPlatform
import RangeFSSystem

/// A mounted set of remote files, backed by a cache.
/// More than 12 stored properties: the composition root: each property is a part with a type and a file of its own
/// (catalog, store, scheduler, directories, revalidator, prefetch, handles, digests, archives, ...), made in `init` and
/// met by the user's verbs here.
public final class RangeFS: Sendable {
    package let catalog: Catalog
    package let store: CacheStore
    let scheduler: FetchScheduler
    public let settings: FileSystemSettings
    /// When the mount started, the root directory's time.
    let mountTime: Int64
    /// The files open through the kernel (OpenHandles.swift).
    let handles = OpenHandles()
    /// The cache generation whose pages the kernel may hold, per inode.
    private let kernelGenerations = LockedBox<[UInt64: UInt64]>([:])
    /// Where the kernel is told to drop names, attributes and pages (KernelNotifier.swift): one queue, one owner.
    let kernel: KernelInvalidations
    /// Whether complete files are read by the kernel itself (FUSE passthrough): made by the mount and given here,
    /// settled by the FUSE adapter once the session is initialised, and turned off if the kernel refuses a
    /// backing file.
    let passthroughMode: LockedBox<PassthroughMode>
    /// The mount's counters (the store's: one registry per mount, made by the mount).
    package var metrics: Metrics { store.metrics }
    /// Describes the proxy chain for status, when the mount has one (the network layer owns it).
    let proxyReport: (@Sendable () -> String)?
    /// The end-to-end digest checks of complete files (RangeFS+Digests.swift).
    let digests = DigestChecks()
    /// Opens cache entries, for this file system and for the parts below (EntryOpener.swift).
    let opener: EntryOpener
    /// Lists web directories and probes their files (RangeFS+Directories.swift).
    let directories: DirectoryService
    /// Fetches the next files of a directory ahead of a reader going through it in order (DirectoryPrefetch.swift).
    let directoryPrefetch: DirectoryPrefetch?
    /// Notices remote changes and keeps the files served while their server is unreachable (Revalidator.swift).
    let revalidator: Revalidator
    /// The archives shown as folders, with `--archives` (RangeFS+Archives.swift).
    package let archives = ArchiveFolders()
    /// Directories open for reading, with the names each read takes its offsets from.
    let directoryHandles = LockedBox(DirectoryHandles())
    /// The `io` errors answered to programs: each message logged once, every one counted (IOErrorReport.swift).
    let ioErrors = IOErrorReport()
    let logger: Logger

    /// A directory open for reading: its children's inodes in name order, taken at its first read.
    struct DirectorySnapshot {
        let inode: UInt64
        var children: [UInt64]?
    }

    struct DirectoryHandles {
        var next: UInt64 = 1
        var open: [UInt64: DirectorySnapshot] = [:]
    }

    public typealias Reply = @Sendable (Result<ReadReply, FileSystemError>) -> Void

    /// The credentials per origin that the fetcher sends; `rangefs add` puts a URL's userinfo here.
    let credentials: CredentialTable
    /// The set of files saved with the cache, and the adds in flight (MountedSet.swift, RangeFS+Saving.swift).
    let mountedSet: MountedSet
    /// The queue the store and the scheduler report into (EntryEvent.swift), drained on a thread of this file system.
    let reports: EventQueue<EntryEvent>?

    /// Makes the file system from its parts, every one given here: `reports` is the queue the store and the
    /// scheduler were given at their birth to report on entries (EntryEvent.swift), drained here from now until this
    /// file system goes (nil: they report to nobody), `kernel` what tells the kernel to drop what
    /// it caches, `passthrough` the mount's passthrough capability, which the FUSE adapter settles, `savedSet` the
    /// mount's writer of the saved set (nil: the cache's, made here, for a file system no mount made).
    package init(catalog: Catalog, store: CacheStore, scheduler: FetchScheduler, reports: EventQueue<EntryEvent>? = nil,
                 kernel: any KernelNotifier = NoKernel(),
                 passthrough: LockedBox<PassthroughMode> = LockedBox(PassthroughMode.pending),
                 settings: FileSystemSettings = FileSystemSettings(), credentials: CredentialTable = CredentialTable(),
                 savedSet: SavedSet? = nil, proxyReport: (@Sendable () -> String)? = nil, logger: Logger) {
        self.credentials = credentials
        self.reports = reports
        mountedSet = MountedSet(savedSet: savedSet ?? SavedSet(store: store))
        self.proxyReport = proxyReport
        self.catalog = catalog
        self.store = store
        self.scheduler = scheduler
        self.settings = settings
        self.logger = logger
        let kernel = KernelInvalidations(kernel)
        self.kernel = kernel
        passthroughMode = passthrough
        mountTime = Int64(time(nil))
        // The parts below open entries as an open does, through the opener made before them (EntryOpener.swift).
        let validated = ValidationTimes()
        let opener = EntryOpener(catalog: catalog, store: store, scheduler: scheduler, settings: settings, kernel: kernel,
                                 digests: digests, validated: validated, logger: logger)
        self.opener = opener
        let revalidator = Revalidator(catalog: catalog, store: store, scheduler: scheduler, settings: settings,
                                      kernel: kernel, opener: opener, validated: validated, logger: logger)
        self.revalidator = revalidator
        // Round trip and throughput per origin, measured on the directory service's transfers; the prefetch sizes
        // its depth from them (LinkEstimate.swift).
        let link = LinkEstimate()
        let directories = Self.makeDirectoryService(catalog: catalog, store: store,
                                                    fetcher: MeasuredFetcher(scheduler.fetcher, estimate: link),
                                                    credentials: credentials, settings: settings, revalidator: revalidator,
                                                    kernel: kernel, opener: opener, logger: logger)
        self.directories = directories
        directoryPrefetch = Self.makeDirectoryPrefetch(catalog: catalog, directories: directories, link: link,
                                                       settings: settings, connections: scheduler.policy.maxTransfers,
                                                       opener: opener)
        // A report only hands work on (EntryEvent.swift); this file system's thread takes them in order, until it goes.
        // A thread of its own, not a dispatch queue's: it waits for reports for the whole life of the file system.
        if let reports {
            startThread(name: "rangefs-reports") { [weak self] in
                while let event = reports.next() { self?.handle(event) }
            }
        }
    }

    /// No report finds this file system any more: the queue's thread ends.
    deinit {
        reports?.close()
    }

    var prefetch: PrefetchPolicy { settings.prefetch }

    public typealias OpenReply = @Sendable (Result<OpenedFile, FileSystemError>) -> Void

    // MARK: Open, read, release

    /// Opens a file for reading and replies with its handle: at once, or after the probe a listed file needs
    /// first (for its validators).
    public func open(_ inode: UInt64, reply: @escaping OpenReply) {
        if openInArchive(inode, reply: reply) { return }
        if catalog.directory(inode: inode) != nil { return reply(.failure(.isADirectory)) }
        guard let found = catalog.item(inode: inode) else { return reply(.failure(.notFound)) }
        directoryPrefetch?.opened(found)
        // Whether the validation answers within this call (no probe); a probe's answer comes on the network's
        // thread, and the open's check of a complete cached file reads the disk: it goes to a queue of its own.
        let answeringInline = LockedBox(true)
        defer { answeringInline.withLock { $0 = false } }
        directories.whenValidated(found) { [self] result in
            if !answeringInline.withLock({ $0 }), case .success = result {
                return store.pipeline.openCheckQueue.async { [self] in answerOpen(result, found: found, reply: reply) }
            }
            answerOpen(result, found: found, reply: reply)
        }
    }

    /// Answers the open of `found` once its validation gave `result`.
    private func answerOpen(_ result: Result<CatalogItem, FileSystemError>, found: CatalogItem,
                            reply: @escaping OpenReply) {
        // The kernel keeps the size it was given (a listing's) and reads no byte past it: a probe that found
        // another size (a stale listing) makes it drop that size before the open is answered, so the first
        // read after the open asks for the real one and is never cut short (issue 45).
        if case .success(let item) = result, item.metadata.size != found.metadata.size
            || item.metadata.sizeKnown != found.metadata.sizeKnown {
            kernel.forgetAttributesNow(of: found.inode)
        } else {
            // A probe that ended before this open (a fetch ahead's) and found another size queued its notice: it
            // goes now, before the open answers.
            kernel.forgetChangedAttributesNow(of: found.inode)
        }
        // A file completed since the last commit is committed first, so that this open passes it through
        // (a copy started right after a cold one then reads at the disk's speed).
        if case .success(let item) = result, let entry = awaitingCommit(item) {
            return store.commit(entry) { [self] in reply(open(item)) }
        }
        reply(result.flatMap { item in open(item) })
    }

    /// The open entry of `item` if only a commit keeps it from passing through to the kernel, and nothing else
    /// does: passthrough on, no handle of it open the normal way, and a file big enough to be committed on its
    /// own (a small file that the open's probe just brought whole is not worth a commit of its own).
    private func awaitingCommit(_ item: CatalogItem) -> CacheEntry? {
        // The size first: a small file's open (nearly every open of a tree of small files) asks nothing more.
        guard settings.passthrough, store.ledger.commitsOnCompletion(size: item.metadata.size),
              passthroughMode.withLock({ $0 == .on }), !handles.isOpen(item.inode),
              !revalidator.isDue(item.metadata.url), let entry = store.openEntry(for: item.metadata.url), entry.matches(item.metadata),
              store.ledger.commitsOnCompletion(entry), entry.awaitsCommitToPassThrough
        else { return nil }
        return entry
    }

    /// Opens `item`, which a probe has seen.
    private func open(_ item: CatalogItem) -> Result<OpenedFile, FileSystemError> {
        let inode = item.inode
        // The kernel may hold this listed file's attributes from before it was opened: `entry(for:)` tells it to
        // drop them if the entry opens now (see `entryOpened`).
        let cacheEntry: CacheEntry
        do {
            // A stream that completed since the catalog was read: the entry it became.
            cacheEntry = try entry(for: catalog.item(inode: inode) ?? item, inUse: true)
        } catch {
            logger.error("cannot open the cache for \(item.name): \(error)")
            return .failure(.cacheUnusable(error))
        }
        // Bytes known to be wrong are never served (RangeFS+Digests.swift).
        if cacheEntry.isKnownWrong {
            cacheEntry.use.end()
            return .failure(.io("digest mismatch"))
        }
        // A complete file from an earlier run is checked in one pass, so that it can pass through (see
        // CacheEntry+OnePassCheck.swift); blocks that fail become absent and the file is no longer complete.
        cacheEntry.checkCompleteFileAtOpen(synchronousLimit: settings.openCheckBytes)
        if !cacheEntry.header.sizeKnown { return openUnknownSize(item, entry: cacheEntry) }
        // Of unknown size in the catalog, settled in the cache (its stream ended, here or in an earlier mount).
        if !item.metadata.sizeKnown { opener.learnSize(cacheEntry.remoteMetadata) }
        if cacheEntry.isComplete {
            checkDigest(of: cacheEntry, item: item)
        } else if cacheEntry.digestRecord?.verdict == .refetching {
            scheduler.fill(cacheEntry, url: item.metadata.url)  // a refetch a remount interrupted
        }
        // Passthrough for a complete, committed file whose validator needs no check now and whose digest is not
        // being checked (a handle the kernel reads itself could not be stopped if the check failed), with no
        // handle open the normal way; once one handle of an inode is in passthrough, the others must be too (the
        // kernel refuses an inode open both ways).
        let url = item.metadata.url
        let passthroughAllowed = settings.passthrough && passthroughMode.withLock { $0 == .on }
            && cacheEntry.isDurablyComplete && !isCheckingDigest(of: cacheEntry) && cacheEntry.passthroughPath != nil
        let readaheadMaximum = ReadaheadWindow.maximum(configured: settings.readaheadMaximum, cacheCap: store.maxBytes)
        let (handle, passthrough) = handles.open(inode: inode, entry: cacheEntry,
                                                 readaheadMaximum: readaheadMaximum) { normal, passing in
            guard passthroughAllowed else { return false }
            return passing > 0 || (normal == 0 && !revalidator.isDue(url))
        }
        if settings.prefetch == .open && !cacheEntry.isComplete { scheduler.fill(cacheEntry, url: url) }
        revalidator.revalidateIfDue(cacheEntry)
        if passthrough {
            cacheEntry.beginPassthrough()
            metrics.add("rangefs_passthrough_opens_total")
            return .success(OpenedFile(handle: handle, keepCache: false, passthroughFile: cacheEntry.passthroughPath))
        }
        let generation = cacheEntry.header.generation
        let keepCache = kernelGenerations.withLock { known in
            defer { known[inode] = generation }
            return known[inode] == nil || known[inode] == generation
        }
        return .success(OpenedFile(handle: handle, keepCache: keepCache))
    }

    /// The FUSE adapter could not give `handle` its backing file: it is answered as a normal handle. With
    /// `disable` (the kernel refused for good: no privilege, no support), no later open tries passthrough.
    public func passthroughFailed(_ handle: UInt64, disable reason: String?) {
        handles.clearPassthrough(handle)?.endPassthrough()
        if let reason {
            let changed = passthroughMode.withLock { mode -> Bool in
                defer { mode = .off(reason) }
                return mode != .off(reason)
            }
            if changed { logger.warning("FUSE passthrough is off: \(reason); complete files are read through the daemon") }
        }
    }

    public func release(_ handle: UInt64) {
        if releaseArchiveMember(handle) { return }
        let file = handles.close(handle)
        if let file, file.passthrough { file.entry.endPassthrough() }
        file?.entry.use.end()
    }

    /// Reads `count` bytes at `offset` for process `pid` (0: unknown); `reply` runs exactly once, now or when the
    /// blocks arrive. While it waits, the READ counts as its process's use of the file (EntryUse.swift).
    public func read(handle: UInt64, offset: UInt64, count: Int, pid: Int32 = 0, reply: @escaping Reply) {
        if readArchiveMember(handle: handle, offset: offset, count: count, reply: reply) { return }
        let fillAfter = settings.prefetch == .use ? settings.fillAfterBytes : nil
        switch handles.plan(handle, offset: offset, count: count, fillAfter: fillAfter) {
        case nil:
            reply(.failure(.badHandle))
        case .blocks(let file, _, let startFill) where !file.entry.header.sizeKnown:
            // Its size is not known yet: read through whichever entry the stream is in now (RangeFS+UnknownSize),
            // unless the version the handle opened was replaced on the server.
            if file.entry.isStale && !file.entry.wasReshaped { return reply(.failure(.stale)) }
            if startFill { scheduler.fill(file.entry, url: file.entry.header.url) }
            readUnknownSize(file.entry.header.url, inode: file.inode, offset: offset, count: count, pid: pid,
                            reply: reply)
        case .blocks(let file, let plan, let startFill):
            let entry = file.entry
            if startFill && !entry.isComplete { scheduler.fill(entry, url: entry.header.url) }
            if let diskAhead = plan.diskAhead { entry.prefetchFromDisk(diskAhead) }
            if plan.range.isEmpty {
                reply(.success(.bytes([])))
            } else {
                serve(plan.range, of: entry, inode: file.inode, counted: true, pid: pid, reply: reply)
            }
            if let networkAhead = plan.networkAhead, !networkAhead.isEmpty {
                scheduler.prefetch(entry, url: entry.header.url, blocks: entry.blocks(covering: networkAhead),
                                   priority: .readahead)
            }
        }
    }

    /// Answers a read of `range` once its blocks are readable, fetching those nobody fetches yet at demand
    /// priority. Also the retry of a read whose memory-held block was dropped before its reply: it asks for the
    /// blocks again without planning the read again.
    /// `counted`: the read is new (not a retry), and counts as a hit or a miss in the metrics.
    /// `pid`: the process the READ is for; while the READ waits, it counts as that process's use of the file.
    /// `whenReplaced`: what a read of a file of unknown size does when its entry is reshaped (it asks again)
    /// instead of answering ESTALE.
    func serve(_ range: Range<UInt64>, of entry: CacheEntry, inode: UInt64, counted: Bool = false,
               pid: Int32 = 0, reply: @escaping Reply, whenReplaced: (@Sendable () -> Void)? = nil) {
        if entry.isKnownWrong { return reply(.failure(.io("digest mismatch"))) }
        let blocks = entry.blocks(covering: range)
        // The kernel's retry of a READ that just failed (see `CacheEntry.recentFailure`).
        let failedLately = entry.recentFailure(blocks)
        if let error = failedLately.map(FetchError.init), error.isTimeout {
            return reply(.failure(Self.fileSystemError(for: error)))
        }
        // Registered before the blocks are asked for, so that the transfers they start see this reader; the waiter
        // below (which runs only if the answer is `.waiting`) or the switch at the end takes it off.
        entry.use.beginRead(pid: pid)
        let availability = scheduler.ensure(entry, url: entry.header.url, blocks: blocks,
                                            singleAttempt: failedLately != nil) { [weak self] result in
            entry.use.endRead(pid: pid)
            guard let self else { return reply(.failure(.io("the file system is shutting down"))) }
            switch result {
            case .success: answer(range, of: entry, inode: inode, reply: reply, whenReplaced: whenReplaced)
            case .failure(.replaced) where whenReplaced != nil && entry.wasReshaped: whenReplaced?()
            case .failure(.replaced):
                revalidator.answerStale(range, of: entry, inode: inode) { reply(.failure(.stale)) }
            case .failure(let failure): reply(.failure(Self.fileSystemError(for: FetchError(failure))))
            }
        }
        if counted {
            let hit = if case .ready = availability { true } else { false }
            metrics.countRead(bytes: range.count, hit: hit)
        }
        switch availability {
        case .ready:
            entry.use.endRead(pid: pid)
            answer(range, of: entry, inode: inode, reply: reply, whenReplaced: whenReplaced)
        case .waiting: break
        case .failed(.replaced) where whenReplaced != nil && entry.wasReshaped:
            entry.use.endRead(pid: pid)
            whenReplaced?()
        case .failed(let failure):
            entry.use.endRead(pid: pid)
            reply(.failure(Self.fileSystemError(for: FetchError(failure))))
        }
    }

    /// Sends the bytes of a read whose blocks are readable; if a memory-held block was dropped meanwhile, serves
    /// the read again (the block is fetched again).
    private func answer(_ range: Range<UInt64>, of entry: CacheEntry, inode: UInt64, reply: @escaping Reply,
                        whenReplaced: (@Sendable () -> Void)?) {
        let blocks = entry.blocks(covering: range)
        store.ledger.recordUse(entry, blocks: blocks)
        // The reply reads the data file after this returns to the adapter; until it is sent, eviction keeps out.
        entry.beginServing(blocks)
        defer { entry.endServing(blocks) }
        if let bytes = entry.reply(for: range) {
            reply(.success(bytes))
        } else {
            serve(range, of: entry, inode: inode, reply: reply, whenReplaced: whenReplaced)
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

    // MARK: Cache entries

    /// The cache entry of `item`, opened on first use (EntryOpener.swift, where every entry opens). With `inUse`,
    /// the entry is counted as held by a handle until `endUse`, so that it is not released while idle.
    package func entry(for item: CatalogItem, inUse: Bool = false) throws(CacheError) -> CacheEntry {
        try opener.entry(for: item, inUse: inUse)
    }

    static func fileSystemError(for error: FetchError) -> FileSystemError {
        switch error {
        case .remoteChanged: .stale
        default: .io(error.userMessage)
        }
    }
}
