// Opening the cache entry of a file, for the file system and for its parts (issue 48).
//
// Every entry opens here, whoever needs it: an open, the first bytes of an open's probe (EntryOpener+FirstBytes.swift),
// a fill, a prefetch of the next files of a directory, the revalidator's check of an offline file. So the kernel
// hears of each entry that starts changing (`entryOpened`, RangeFS+Attributes.swift says why), and a file of unknown
// size whose stream ended opens the entry of its size. The revalidator, the directory service and the directory
// prefetch are given this object when they are made, after it and before the file system: none of them holds the
// file system, and nothing is attached to them after their `init`.

import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

/// Opens cache entries the way the file system does, for it and for the parts it is made of.
final class EntryOpener: Sendable {
    let catalog: Catalog
    let store: CacheStore
    let scheduler: FetchScheduler
    let settings: FileSystemSettings
    /// Where the kernel is told to drop the attributes it keeps of a file whose entry opened.
    let kernel: KernelInvalidations
    /// The digest checks under way: an entry being checked is not settled (`cachedBytesSettled`).
    let digests: DigestChecks
    /// When each URL was last checked against its server: a settled stream counts as a check (`learnSize`).
    let validated: ValidationTimes
    let logger: Logger

    init(catalog: Catalog, store: CacheStore, scheduler: FetchScheduler, settings: FileSystemSettings,
         kernel: KernelInvalidations, digests: DigestChecks, validated: ValidationTimes, logger: Logger) {
        self.catalog = catalog
        self.store = store
        self.scheduler = scheduler
        self.settings = settings
        self.kernel = kernel
        self.digests = digests
        self.validated = validated
        self.logger = logger
    }

    /// The cache entry of `item`, opened on first use so that mounting does no work per cached file.
    /// With `inUse`, the entry is counted as held by a handle until `endUse`, so that it is not released while idle.
    /// A listed file no probe has seen opens the version its cache holds unless its listing contradicts it.
    func entry(for item: CatalogItem, inUse: Bool = false) throws(CacheError) -> CacheEntry {
        // A file of unknown size whose stream ended: its entry of the size, before the catalog heard of it.
        if let settled = settledEntry(of: item) {
            if inUse { settled.use.begin() }
            return settled
        }
        let metadata = DirectoryService.versionToOpen(item, store: store)
        let wasOpen = store.openEntry(for: metadata.url) != nil
        let entry = inUse ? try store.entryInUse(for: metadata, blockSize: settings.blockSize)
                          : try store.entry(for: metadata, blockSize: settings.blockSize)
        // An entry that opens complete, from which nothing takes blocks, changes no attribute the kernel holds.
        if !wasOpen && !cachedBytesSettled(entry) { entryOpened(url: metadata.url) }
        return entry
    }

    /// The open entry of `item`'s URL if `item` is of unknown size but the entry is of a known one: its stream
    /// ended and the catalog is about to learn the size (it learns it here). Opening `item`'s version instead
    /// would find files of another shape and start them over.
    func settledEntry(of item: CatalogItem) -> CacheEntry? {
        guard !item.metadata.sizeKnown, let open = store.openEntry(for: item.metadata.url), !open.isStale,
              open.header.sizeKnown else { return nil }
        learnSize(open.remoteMetadata)
        return open
    }

    /// The size of the file at `metadata.url` is known from now on: each of its catalog items takes it, the
    /// kernel is told first (as a probe that found another size does, so that an open in between waits for the
    /// notice), and the file counts as checked against its server now.
    func learnSize(_ metadata: RemoteMetadata) {
        for item in catalog.items(url: metadata.url) where !item.metadata.sizeKnown || item.metadata.size != metadata.size {
            var known = metadata
            known.suggestedName = item.metadata.suggestedName
            kernel.attributesChanged(of: item.inode)
            catalog.update(inode: item.inode, metadata: known)
        }
        validated.record(metadata.url)
    }

    /// Whether the cached bytes of the open `entry` stay what they are now: it is complete, and nothing takes
    /// blocks from it (no cap to evict them for, no digest check that may drop them). Issue 46: with its attributes
    /// kept for no time, `cat` of a cached small file cost three GETATTRs (its `fstat`, and a read at and past the
    /// end each asking for the size again), more round trips than its open and read together.
    func cachedBytesSettled(_ entry: CacheEntry) -> Bool {
        store.maxBytes == nil && entry.isComplete && !entry.isStale && !entry.isKnownWrong
            && entry.digestRecord?.verdict != .refetching && !digests.isChecking(entry)
    }

    /// The cache entry of `url` just opened: its cached bytes may change from now on. Tells the kernel to drop the
    /// attributes it may keep of the files mounted from `url` (RangeFS+Attributes.swift says why), off this thread,
    /// which may answer a request the kernel waits for.
    func entryOpened(url: String) {
        let inodes = catalog.items(url: url).filter(Self.keepsAttributesInKernel).map(\.inode)
        kernel.forgetAttributes(of: inodes)
    }

    /// Whether the kernel is given `item`'s attributes for as long as its listing is fresh while its entry is
    /// closed: a listed file whose size and date are known exactly.
    static func keepsAttributesInKernel(_ item: CatalogItem) -> Bool {
        item.listed && (item.validated || item.attributesExact) && item.metadata.sizeKnown
    }

    /// Opens the cache entry of `file`, fetched ahead of its reader, if the cache holds it whole, and checks it
    /// (the one-pass check of a complete file from an earlier run): its open then finds both done. Issue 46: an
    /// open after a remount read the entry the validation had just read, then the whole file for its check, before
    /// it answered; here that happens beside the reader. An entry nobody opens is released when idle, as a fetched
    /// one is.
    func prepareEntry(of file: CatalogItem) {
        guard let item = catalog.item(inode: file.inode), item.validated, item.metadata.sizeKnown,
              item.metadata.size > 0, store.openEntry(for: item.metadata.url) == nil,
              store.cachedBytes(of: item.metadata) == item.metadata.size
        else { return }
        // An entry that cannot be opened is left to the open, which opens it again and says why.
        guard let entry = try? entry(for: item) else { return }
        entry.checkCompleteFileAtOpen(synchronousLimit: settings.openCheckBytes)
    }
}
