// Folder Cache/: the local copies (entries, their blocks, CRCs, commits, eviction) and the BlockStore seam that
// fetching writes through. It may use System/ only; it knows nothing of HTTP, fetching or the file system.
//
// The cache directory: one lock, one or two files per entry (CacheFormat.swift), and the group-commit timer.
//
// Opening the store does no work proportional to what the cache holds: entries are opened when a mounted URL
// first needs one. A second process on the same directory is refused by an flock on `lock`, so two daemons never
// write the same files. The store owns the queues and memory bounds its entries share (`BlockPipeline`), so two
// stores in one process share nothing.
//
// Lock order, for the whole core: docs/internals.md, "Locks". Within the cache, the ledger's eviction lock comes
// before an entry's commit lock, which comes before its state lock (the innermost).
//
// The rule that keeps a mount of a library responsive: no lock is held across a network call, a reply to the
// kernel, or a wait for the writer, and no FUSE thread waits for the network. A lookup, readdir, open or read that
// needs the network registers a waiter and returns; the completion answers it from the fetcher's or a worker's
// thread, and waiters of the same directory, probe or block share one request in flight.

import Dispatch
import Glibc
import Logging
import RangeFSSystem
import Synchronization

/// The on-disk cache: a directory of entries, locked by one process at a time.
/// More than 12 stored properties: the cache's root and lock, the parts it shares with its entries (settings, pipeline,
/// ledger, descriptors), its tables of open entries, summaries and names on disk, each under a lock of its own so that
/// they are never held together, and the group commit's queue, trigger and flag.
public final class CacheStore: Sendable {
    public let root: String
    let settings: StoreSettings
    /// The cap on cached bytes of this mount's files (`--cache-max-size`), or nil for none.
    package var maxBytes: Int? { settings.maxBytes }
    package let pipeline: BlockPipeline
    /// What every entry of this store shares with it (StoreLedger.swift): an entry holds this, never its store.
    package let ledger: StoreLedger
    /// Held open for the life of the store: its lock, and the descriptor group commits flush the file system by.
    let lockFile: SystemFile
    /// The descriptors of every entry's files: bounded, whatever the number of entries.
    let descriptors: DescriptorPool
    /// Whether `entries/` may hold v1 folders (CacheStore+Migration.swift): found at the store's birth (a cache
    /// made by v2 has none). Without them, an entry's lookups skip v1's paths: two failing system calls per file of
    /// a cold read.
    let mayHoldLegacyFolders: Atomic<Bool>
    package let entries = LockedBox<[String: CacheEntry]>([:])
    /// What is cached of entries that are not open (CacheStore+Summaries.swift).
    let summaries = LockedBox(EntrySummaries())
    /// The names of the entries on disk (EntryIndex.swift), read at the first question about one not open.
    let entryIndex = LockedBox(EntryIndex())
    /// Where the store reports completions and reshapes to whoever composes it (EntryEvent.swift), fixed at its
    /// birth; nil: nobody listens.
    let reports: EventQueue<EntryEvent>?
    /// The mount's counters (the ledger counts evicted bytes in them).
    package var metrics: Metrics { ledger.metrics }
    // The group commit (CacheStore+Commit.swift).
    let commitQueue = DispatchQueue(label: "rangefs.commit")
    /// Starts the group commit early: the store's, made before its ledger, which is given only a way to fire it.
    let commitTrigger: CommitTrigger
    let committing = LockedBox(false)
    let logger: Logger

    /// The default location: `$XDG_CACHE_HOME/rangefs`, else `~/.cache/rangefs`.
    public static func defaultRoot(environment: [String: String]) -> String {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/rangefs" }
        return (environment["HOME"] ?? "/root") + "/.cache/rangefs"
    }

    /// Opens (creating if needed) the cache at `root` and takes its lock. `reports`: where completions and
    /// reshapes are sent (the file system drains it), nil for nobody; the store asks nothing of its owner (an entry
    /// with work queued or running says so itself: `EntryUse.addWork`).
    package init(root: String, settings: StoreSettings = StoreSettings(), reports: EventQueue<EntryEvent>? = nil,
                 metrics: Metrics = Metrics(), logger: Logger) throws(CacheError) {
        self.root = root
        self.reports = reports
        self.settings = settings
        pipeline = BlockPipeline(settings: settings)
        self.logger = logger
        let commitTrigger = CommitTrigger(queue: commitQueue)
        self.commitTrigger = commitTrigger
        ledger = StoreLedger(settings: settings, metrics: metrics,
                             rotatingETags: RotatingETags(path: root + "/rotating-etags", logger: logger),
                             completed: { reports?.send(.completed($0)) }, commitSignal: commitTrigger.signal,
                             logger: logger)
        descriptors = DescriptorPool(capacity: settings.openFiles ?? DescriptorPool.capacityForThisProcess())
        // A v1 folder is named by 32 hex digits, a v2 shard by 2: the first v1 name ends the look (O(1) either
        // way: a v2 cache's `entries/` holds at most 256 shards).
        mayHoldLegacyFolders = Atomic(FileSystemCalls.containsName(in: root + "/entries") { $0.utf8.count == 32 })
        do {
            try FileSystemCalls.makeDirectories(root + "/entries")
            chmod(root, 0o700)
            let tag = root + "/CACHEDIR.TAG"
            if access(tag, F_OK) != 0 {
                let text = "Signature: 8a477f597d28d172789f06886806bc55\n# This is a rangefs cache; see https://bford.info/cachedir/\n"
                try FileSystemCalls.replaceAtomically(tag, with: Array(text.utf8))
            }
            lockFile = try SystemFile(path: root + "/lock", flags: O_RDWR | O_CREAT)
        } catch {
            throw .system(error)
        }
        if !Self.takeLock(lockFile) {
            // Who holds it, for the message; an unreadable lock file just says less.
            let holder = (try? lockFile.read(at: 0, count: 64)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            let trimmed = holder.trimmingWhitespace()
            throw .locked(path: root, holder: trimmed.isEmpty ? "another process" : trimmed)
        }
        do {
            try lockFile.truncate(to: 0)
            try lockFile.write(Array("pid \(getpid())\n".utf8), at: 0)
        } catch {
            logger.debug("cannot record this process in \(root)/lock: \(error)")
        }
        // The ledger's early commits run the group commit of this store, as long as it lives (its own trigger).
        commitTrigger.run { [weak self] in self?.commitAll() }
        // Eviction opens released entries again through this, as long as the store lives (StoreLedger+Dormant).
        ledger.reopenHook.withLock { $0 = ReopenHook { [weak self] url in self?.reopenParked(url) ?? false } }
        ledger.settleHook.withLock {
            $0 = SettleHook { [weak self] entry, size, last, next in
                guard let self else { return next?(nil) ?? () }
                reshapeAfterStream(entry, size: size, lastBlock: last, next: next)
            }
        }
    }

    /// Entries may outlive their store (a handle's, a test's): their ledger learns that no commit will come, so
    /// that blocks they store never wait for one, and that their headers are no longer this process's to write.
    deinit {
        commitTrigger.cancel()
        ledger.detach()
    }

    /// How long a new store waits for a holder of the lock that is shutting down (its last commit, then exit).
    static let stoppingHolderWait: Duration = .seconds(30)

    /// Takes the cache's lock. If a rangefs that is shutting down holds it (`markStopping`), waits for it to
    /// exit, up to `stoppingHolderWait`: a mount right after an unmount then succeeds instead of failing.
    private static func takeLock(_ lockFile: SystemFile) -> Bool {
        let deadline = ContinuousClock.now + stoppingHolderWait
        while flock(lockFile.descriptor, LOCK_EX | LOCK_NB) != 0 {
            // Only for the message: an unreadable lock file names no holder.
            let holder = (try? lockFile.read(at: 0, count: 64)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            guard holder.contains("stopping"), ContinuousClock.now < deadline else { return false }
            usleep(20_000)
        }
        return true
    }

    /// Says in the lock file that this process is shutting down, so that a mount of the same cache waits for it
    /// instead of failing.
    public func markStopping() {
        ledger.stopping.store(true, ordering: .relaxed)
        do {
            try lockFile.truncate(to: 0)
            try lockFile.write(Array("pid \(getpid()) stopping\n".utf8), at: 0)
        } catch {
            logger.debug("cannot record the shutdown in \(root)/lock: \(error)")
        }
    }

    /// Returns once every block accepted so far by this store's entries is written, or failed to be.
    package func waitForWrites() { pipeline.waitForWrites() }

    /// Memory for fetched blocks, recycled within this store.
    package var bufferPool: BufferPool { pipeline.buffers }

    /// The v1 folder for `url` (CacheFormat.swift): the first 32 hex digits of its SHA-256. Nothing is made in it
    /// any more; an older cache's is migrated (CacheStore+Migration.swift).
    public func directory(for url: String) -> String {
        root + "/entries/" + String(SHA256.hexDigest(url).prefix(32))
    }

    /// Closes the open entry of `url`, if any, committing what it stored so that a later mount or `add` finds it;
    /// it goes stale, so its readers get ESTALE.
    package func forget(_ url: String) {
        close(url, committing: true)
    }

    /// Closes the open entry of `url`, if any: it goes stale. With `committing`, what it stored is made durable
    /// first; without, the caller is about to delete its files.
    func close(_ url: String, committing: Bool) {
        forgetSummary(of: url)
        ledger.forgetParked(url)
        guard let entry = entries.withLock({ $0.removeValue(forKey: url) }) else { return }
        ledger.account(-Int(entry.cachedBytes))
        if committing {
            waitForWrites()
            do { try entry.commit() } catch { logger.error("cache commit failed: \(error)") }
        }
        entry.markStale()
    }

    /// The entry of `url` if one is open, without opening one.
    package func openEntry(for url: String) -> CacheEntry? {
        entries.withLock { $0[url] }
    }

    /// Opens the entry for `metadata` (see `entry(for:blockSize:)`) for a handle: it stays open until `endUse`.
    package func entryInUse(for metadata: RemoteMetadata, blockSize: Int) throws(CacheError) -> CacheEntry {
        while true {
            let entry = try entry(for: metadata, blockSize: blockSize)
            // Counted under the table's lock, so that an idle release cannot take it in between.
            let counted = entries.withLock { table -> Bool in
                guard table[metadata.url] === entry else { return false }
                entry.use.begin()
                return true
            }
            if counted { return entry }
        }
    }

    /// Opens the entry for `metadata`, reusing what is cached if it describes the same remote content, else
    /// starting it empty. `blockSize` applies only to new entries; an existing entry keeps its own.
    package func entry(for metadata: RemoteMetadata, blockSize: Int) throws(CacheError) -> CacheEntry {
        // Two opens of a file that has no open entry must not both make one: the second would rename a header
        // over the first's and write the same files through another block table.
        let entry: CacheEntry
        if let open = openMatching(metadata) {
            entry = open
        } else {
            entry = try ledger.opening(metadata.url).withLock { () throws(CacheError) -> CacheEntry in
                try openEntryFiles(for: metadata, blockSize: blockSize)
            }
        }
        // A probe's answer that describes the version cached may be later than the one its header keeps.
        entry.noteAnswered(at: metadata.answeredAt)
        return entry
    }

    /// The open entry of `metadata`'s version, touched under the table's lock: an idle release either sees this
    /// activity or has already removed it.
    private func openMatching(_ metadata: RemoteMetadata) -> CacheEntry? {
        let previous = entries.withLock { table in
            table[metadata.url].map { entry in
                entry.use.noteActivity()
                return entry
            }
        }
        guard let previous, previous.matches(metadata), !previous.isStale else { return nil }
        return previous
    }

    /// Opens the entry of `metadata` from its files, or starts it (under `opening`).
    func openEntryFiles(for metadata: RemoteMetadata, blockSize: Int) throws(CacheError) -> CacheEntry {
        if let open = openMatching(metadata) { return open }
        // Taken out of the table first: an idle release that has not parked it yet then never does, so that its
        // bytes leave the count once.
        var distrusted = false
        if let previous = entries.withLock({ $0.removeValue(forKey: metadata.url) }) {
            ledger.account(-Int(previous.cachedBytes))
            // Stale while its version is the one asked for: a fetch found other bytes than it holds for this very
            // version (a server without a validator, whose file changed at the same length), so its files are not
            // reused either; reloaded, they served the old bytes beside the new (RangelessResumeTests).
            distrusted = previous.isStale && previous.matches(metadata)
            previous.markStale()
        }
        let entry: CacheEntry
        do {
            if distrusted {
                _ = summaries.withLock { $0.loadedAhead.take(metadata.url) }
                try entryFiles(for: metadata.url).removeFilesDurably()
            }
            entry = try openOrCreateEntry(for: metadata, blockSize: blockSize)
        } catch {
            throw .system(error)
        }
        let open = entries.withLock { table in
            table[metadata.url] = entry
            // Under the entries lock, so that an idle release (which parks under it) sees the entry counted and
            // recorded, never between: released before its bytes were counted, they left a count they were not in
            // yet, and the cache held more than the cap.
            forgetSummary(of: metadata.url)
            countOpened(entry)
            return table.count
        }
        // Files opened faster than commits come: the next one, which releases what is idle, comes now (once per
        // `idleEntryLimit` opened), so that the open entries stay near that limit whatever the rate.
        if open >= 2 * settings.idleEntryLimit && open % settings.idleEntryLimit == 0 { ledger.commitSoon() }
        return entry
    }

    /// Counts a just opened entry's cached bytes under the cap and puts its blocks in the LRU queue: a released
    /// entry of this file hands its place over (StoreLedger+Dormant.swift); what an earlier run cached counts as
    /// least recently used, in file order.
    private func countOpened(_ entry: CacheEntry) {
        let adopted = ledger.adopt(entry)
        ledger.account(Int(entry.cachedBytes))
        guard maxBytes != nil else { return }
        let present = entry.presentBlocks
        var runStart: Int?
        for index in 0...present.blockCount {
            let isPresent = index < present.blockCount && present.contains(index) && (adopted?[index] ?? 0) == 0
            if isPresent, runStart == nil { runStart = index }
            if !isPresent, let start = runStart {
                ledger.recordUse(entry, blocks: start..<index)
                runStart = nil
            }
        }
    }

    /// The present blocks the bitmap file of the v1 `folder` records for `header`'s version; nil (with a log line
    /// unless `quietly`) if it is missing, damaged or of another version.
    func loadBitmap(folder: String, header: CacheHeader, quietly: Bool = false) -> BlockBitmap? {
        var logger = logger
        if quietly { logger.logLevel = .error }
        let bytes: [UInt8]
        do {
            guard let read = try FileSystemCalls.readSmallFile(folder + "/bitmap") else { return nil }
            bytes = read
        } catch {
            logger.warning("cannot read \(folder)/bitmap (\(error)); starting this entry empty")
            return nil
        }
        do {
            let record = try BitmapRecord.decode(bytes)
            guard record.generation == header.generation, record.blockSize == header.blockSize,
                  record.present.blockCount == header.blockCount
            else {
                logger.warning("bitmap in \(folder) belongs to another version of the file; starting it empty")
                return nil
            }
            return record.present
        } catch {
            logger.warning("damaged bitmap in \(folder) (\(error)); starting this entry empty")
            return nil
        }
    }
}
