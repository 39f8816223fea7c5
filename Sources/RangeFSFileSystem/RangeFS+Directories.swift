// Names and directories, answered later when they need the network (see DirectoryService): a lookup, readdir or
// open of a web directory's file never holds a FUSE thread while a listing or probe runs, and a directory that
// stalls delays no other directory, file or read.

import Dispatch
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem
import Synchronization

extension RangeFS {
    /// The deepest a listed tree goes (see `DirectoryService.maximumDepth`).
    static var maximumDepth: Int { DirectoryService.maximumDepth }

    /// Replies `reply` once, now or from a listing's or probe's completion.
    /// The files a listing states exactly (nginx JSON and HTML, Caddy) keep their attributes in the kernel as
    /// long as the listing is fresh, so a second `ls -l` of 100,000 files costs no request to the daemon.
    /// A file whose cache entry is open shows progress as it happens instead (see `kernelCacheSeconds`).
    // The reply's type is written out, not a public typealias: the core's public declarations are capped.
    public func lookup(parent: UInt64, name: String,
                       reply: @escaping @Sendable (Result<FileAttributes, FileSystemError>) -> Void) {
        if lookupInArchive(parent: parent, name: name, reply: reply) { return }
        guard catalog.directory(inode: parent) != nil else { return reply(.failure(.notADirectory)) }
        directories.whenListed(parent) { [self] in
            if let failure = directories.listingFailure(of: parent) { return reply(.failure(.io(failure))) }
            switch catalog.node(named: name, in: parent) {
            case .file(let item):
                directories.whenAttributesKnown(item) { [self] in
                    // A dead link found by its probe has left the directory.
                    reply(catalog.item(inode: item.inode) == nil ? .failure(.notFound) : attributes(of: item.inode))
                }
            case .directory(let directory): reply(attributes(of: directory.inode))
            case nil: reply(.failure(.notFound))
            }
        }
    }

    /// Calls `reply` once directory `inode` has been listed, with its size in names.
    func whenListed(_ inode: UInt64, reply: @escaping @Sendable (Result<Int, FileSystemError>) -> Void) {
        guard catalog.directory(inode: inode) != nil else {
            return reply(.failure(catalog.item(inode: inode) == nil ? .notFound : .notADirectory))
        }
        directories.whenListed(inode) { [self] in
            if let failure = directories.listingFailure(of: inode) { return reply(.failure(.io(failure))) }
            reply(.success(catalog.childCount(of: inode)))
        }
    }

    /// Lists the directories the mount was given (the root, or each directory URL) and waits for them: at mount,
    /// so that a directory that cannot be listed is reported like a bad file URL. Each with how its listing went.
    public func listDirectorySources() -> [(directory: CatalogDirectory, outcome: ListingOutcome)] {
        let sources = catalog.directorySources
        let outcomes = LockedBox([ListingOutcome?](repeating: nil, count: sources.count))
        let group = DispatchGroup()
        for (index, directory) in sources.enumerated() {
            group.enter()
            directories.listNow(directory.inode) { outcome in
                outcomes.withLock { $0[index] = outcome }
                group.leave()
            }
        }
        group.wait()
        return outcomes.withLock { found in
            zip(sources, found).map { ($0, $1 ?? .failed("no answer", gone: false)) }
        }
    }

    /// Lists directory `inode` now and waits for the outcome (`rangefs add URL/`).
    func listNow(_ inode: UInt64) -> ListingOutcome {
        let done = DispatchSemaphore(value: 0)
        let result = LockedBox<ListingOutcome>(.listed)
        directories.listNow(inode) { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }

    /// The directories that cannot be listed and show nothing, with why (for `status`).
    var failedListings: [UInt64: String] {
        directories.failedListings
    }

    /// At most `count` children of directory `inode` from position `start` in name order.
    func children(of inode: UInt64, from start: Int, count: Int) -> [CatalogNode] {
        catalog.children(of: inode, from: start, count: count).nodes
    }

    /// One name of a directory read (`readDirectory`), at `position` in the directory's order, with its
    /// attributes when they were asked for and are known.
    public struct DirectoryEntry: Sendable {
        public let position: Int
        public let name: String
        public let inode: UInt64
        public let isDirectory: Bool
        public let attributes: FileAttributes?
    }

    /// Opens directory `inode` for reading: its names are taken once, at the first read, so that offsets stay
    /// stable while lookups remove dead links or a refresh changes the directory.
    public func openDirectory(_ inode: UInt64) -> Result<UInt64, FileSystemError> {
        // An archive's folders never change for their inodes: their reads need no snapshot.
        if isArchiveFolder(inode) { return .success(ArchiveFolders.handleBit) }
        guard catalog.directory(inode: inode) != nil else {
            return .failure(catalog.item(inode: inode) == nil ? .notFound : .notADirectory)
        }
        return .success(directoryHandles.withLock { handles in
            let handle = handles.next
            handles.next += 1
            handles.open[handle] = DirectorySnapshot(inode: inode)
            return handle
        })
    }

    public func releaseDirectory(_ handle: UInt64) {
        let snapshot = directoryHandles.withLock { $0.open.removeValue(forKey: handle) }
        // Reading a large directory leaves what its replies took free but held by the process: give it back.
        if (snapshot?.children?.count ?? 0) > 10_000 { FileSystemCalls.releaseFreeMemory() }
    }

    /// The names of directory `inode` (opened as `handle`) at positions `start..<start+count` of the snapshot
    /// taken at its first read, once it is listed. Names that left the directory since are skipped. With
    /// `attributes` (READDIRPLUS), each name comes with the attributes known without a request; a listed file whose
    /// listing stated no exact size and date comes as a plain name, and is probed when it is looked up (`stat`,
    /// `ls -l`). The kernel asks READDIRPLUS for the start of every directory read, a names-only `ls` included:
    /// probing here made a plain `ls` of a page of 100,000 links send 865 requests (issue 35). No directory read
    /// ever sends a request.
    public func readDirectory(_ inode: UInt64, handle: UInt64, from start: Int, count: Int, attributes: Bool,
                              reply: @escaping @Sendable (Result<[DirectoryEntry], FileSystemError>) -> Void) {
        if readArchiveDirectory(inode, from: start, count: count, reply: reply) { return }
        guard catalog.directory(inode: inode) != nil else { return reply(.failure(.notADirectory)) }
        // A read further into a directory this handle has read already answers from its snapshot, asking nothing
        // of the listing: a first `ls -l` of a million names outlived the cache time (60 s), and its next read
        // found the listing old and listed the million again under it (a 1.6 GB peak). A new read from the start
        // is a new look, and refreshes an old listing as before.
        let snapshotted = start > 0 && directoryHandles.withLock { handles in
            handles.open[handle].map { $0.inode == inode && $0.children != nil } ?? false
        }
        let answer: @Sendable () -> Void = { [self] in
            if let failure = directories.listingFailure(of: inode) { return reply(.failure(.io(failure))) }
            // A reader reads this directory from its start: the subdirectories it reaches next are listed ahead.
            if start == 0 { directories.walkAhead(from: inode) }
            let (inodes, more) = directoryHandles.withLock { handles -> ([UInt64], Bool)? in
                guard var snapshot = handles.open[handle], snapshot.inode == inode else { return nil }
                if snapshot.children == nil {
                    snapshot.children = catalog.childInodes(of: inode)
                    handles.open[handle] = snapshot
                }
                let children = snapshot.children!
                guard start < children.count else { return ([], false) }
                let end = min(children.count, start + count)
                return (Array(children[start..<end]), end < children.count)
            } ?? {
                // A handle the kernel never opened (or already released): the directory as it is now.
                let children = catalog.childInodes(of: inode)
                return (Array(children.dropFirst(start).prefix(count)), start + count < children.count)
            }()
            // A cache that holds no entry at all has nothing of any file: a plain listed file's attributes are then
            // what its listing stated, read from the catalog's compact fields, with no URL made to look for its entry.
            let compact = !attributes || store.holdsNoEntries()
            let children = catalog.directoryChildren(inodes, compact: compact)
            let entries = children.enumerated().compactMap { offset, found -> DirectoryEntry? in
                guard let child = found else { return nil }  // a dead link, found by a lookup
                var known: FileAttributes?
                if attributes {
                    switch child {
                    case .listed(let inode, let listed): known = listedAttributes(inode, listed)
                    case .node(let node) where attributesAreKnown(node):
                        switch node {
                        case .file(let item): known = self.attributes(ofFile: item)
                        case .directory(let directory):
                            if case .success(let found) = self.attributes(of: directory.inode) { known = found }
                        }
                    case .node: break
                    }
                }
                return DirectoryEntry(position: start + offset, name: child.name, inode: child.inode,
                                      isDirectory: child.isDirectory || isArchiveFolder(named: child.name,
                                                                                         inode: child.inode),
                                      attributes: known)
            }
            // Every name of this stretch left the directory (dead links that lookups found): an empty answer would
            // end the directory. The next stretch is twice as long (up to 4,096 names).
            if entries.isEmpty && more {
                return readDirectory(inode, handle: handle, from: start + count, count: min(4096, count * 2),
                                     attributes: attributes, reply: reply)
            }
            reply(.success(entries))
        }
        if snapshotted { answer() } else { directories.whenListed(inode, answer) }
    }

    /// The attributes of the plain listed file `inode` while the cache holds no entry (`readDirectory`): as
    /// `attributes(ofFile:)` gives them then, nothing cached and kept by the kernel while the listing is fresh;
    /// nil when its listing stated no exact size and date, which a probe must see first.
    func listedAttributes(_ inode: UInt64, _ listed: ListedAttributes) -> FileAttributes? {
        guard listed.attributesExact else { return nil }
        return FileAttributes(inode: inode, isDirectory: false, size: listed.size, cachedBytes: 0,
                              modificationTime: listed.listedTime ?? mountTime,
                              kernelCacheSeconds: settings.directoryCacheTime.seconds)
    }

    /// Whether the kernel may be handed `node`'s attributes without a probe: not for a listed file whose listing
    /// stated no exact size and date, which a probe must see first.
    func attributesAreKnown(_ node: CatalogNode) -> Bool {
        guard case .file(let item) = node else { return true }
        return !item.listed || item.validated || item.attributesExact
    }

    /// Whether `inode` is a directory of the mount.
    func isDirectory(_ inode: UInt64) -> Bool {
        catalog.directory(inode: inode) != nil
    }

    /// The parent directory of directory `inode` (the root's is itself).
    public func parent(of inode: UInt64) -> UInt64 {
        archiveParent(of: inode) ?? catalog.directory(inode: inode)?.parent ?? Catalog.rootInode
    }

    /// How long the kernel may keep the attributes and name of `item`: a listed file's as long as its listing is
    /// fresh, unless its cache entry is open and its cached bytes may still change (it downloads, and `ls -s` must
    /// show that). Zero for files mounted one by one, whose progress always shows.
    func kernelCacheSeconds(of item: CatalogItem) -> Double {
        guard EntryOpener.keepsAttributesInKernel(item) else { return 0 }
        if let entry = store.openEntry(for: item.metadata.url), !opener.cachedBytesSettled(entry) { return 0 }
        return settings.directoryCacheTime.seconds
    }

    /// Makes the directory service that lists and probes for this file system, with its reports wired to the
    /// kernel's invalidations and to the first bytes' store.
    static func makeDirectoryService(catalog: Catalog, store: CacheStore, fetcher: RangeFetching,
                                     credentials: CredentialTable, settings: FileSystemSettings, revalidator: Revalidator,
                                     kernel: KernelInvalidations, opener: EntryOpener,
                                     logger: Logger) -> DirectoryService {
        var events = DirectoryService.Events()
        events.offline = { [weak revalidator] url, reason in revalidator?.markOffline(url, reason: reason) }
        events.validated = { [weak revalidator] url, time in revalidator?.markValidated(url, at: time) }
        // Queued: the lookup that found the name gone may still hold its directory.
        events.removed = { parent, name in kernel.forgetName(name, in: parent) }
        events.changed = { inode in kernel.attributesChanged(of: inode) }
        events.firstBytes = { [weak opener] metadata, body in
            guard let opener else { return body.discard() }
            opener.store(firstBytes: body, of: metadata)
        }
        return DirectoryService(catalog: catalog, store: store, fetcher: fetcher, credentials: credentials,
                                settings: settings, events: events, logger: logger)
    }
}
