// Archives shown as folders (`--archives`, issue 49): a mounted or listed file named .zip, .tar, .tar.gz/.tgz or
// .iso is a folder holding its members. The operations here answer for those folders and their members; RangeFS's
// own operations hand them over with one line each (`...InArchive` returns false for any other inode).
//
// The index is built on the first lookup or readdir of the folder, on the archive queue (its reads block until
// their blocks arrive, so never on a FUSE thread), through the archive's cache entry (CacheEntrySource): what it
// reads is cached, crash-safe and offline like any read. It is kept in the cache for the archive's version
// (CacheStore+ArchiveIndexes.swift): a remount lists the folder from it at once, with no request. A fault gives EIO
// on the folder, and the FUSE adapter logs its message (which names the archive and the fault) once.
//
// A member's read goes through its own ArchiveMemberReader (stored: one range of the archive; deflated zip and
// tar.gz: inflated from the member's start or the nearest seek point), kept per open handle, so a `cat` that reads
// a deflated member in order inflates it once.

import Dispatch
import RangeFSArchives
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch

extension RangeFS {
    /// The blocking work of archives: building indexes and reading members.
    static let archiveQueue = DispatchQueue(label: "rangefs.archives", attributes: .concurrent)

    /// The archive format of catalog file `item` when the mount shows archives as folders.
    func archiveFormat(of item: CatalogItem) -> ArchiveIndex.Format? {
        // The settings first: every getattr and readdirplus of a mount without archives passes here.
        guard settings.archives || archives.anyMarked, item.metadata.sizeKnown,
              let format = ArchiveFolders.format(ofName: item.name) else { return nil }
        guard settings.archives || archives.coversMarked(item.metadata.url) else { return nil }
        return format
    }

    /// Shows the archive at `url` as a folder without `--archives` (a list-file line or a `rangefs add` ending in
    /// `archives`); for a directory URL, the archives listed under it.
    package func showArchives(of url: String) {
        archives.mark(url)
    }

    /// Whether `url` was given with `archives` (what the saved set keeps for it).
    package func showsArchives(of url: String) -> Bool {
        archives.isMarked(url)
    }

    /// Forgets that `url` was given with `archives` (it is removed from the mount).
    func stopShowingArchives(of url: String) {
        archives.unmark(url)
    }

    /// The catalog file `inode` if it is shown as an archive's folder.
    package func archiveItem(_ inode: UInt64) -> CatalogItem? {
        guard settings.archives || archives.anyMarked, let item = catalog.item(inode: inode),
              archiveFormat(of: item) != nil else { return nil }
        return item
    }

    /// The attributes of the folder an archive is shown as: its date, and its cached bytes as `du` counts them.
    func archiveFolderAttributes(_ item: CatalogItem) -> FileAttributes? {
        guard archiveFormat(of: item) != nil else { return nil }
        return FileAttributes(inode: item.inode, isDirectory: true, size: 0, cachedBytes: cachedBytes(of: item),
                              modificationTime: item.shownModificationTime ?? mountTime,
                              kernelCacheSeconds: kernelCacheSeconds(of: item))
    }

    /// The attributes of `inode` if it is an archive's folder or member; nil for any other inode.
    func archiveAttributes(of inode: UInt64) -> Result<FileAttributes, FileSystemError>? {
        if let (slot, position) = ArchiveTree.member(of: inode) {
            guard let (tree, _) = archives.tree(slot: slot), tree.index.members.indices.contains(position) else {
                return .failure(.stale)
            }
            return .success(memberAttributes(tree, position))
        }
        return archiveItem(inode).flatMap(archiveFolderAttributes).map { .success($0) }
    }

    private func memberAttributes(_ tree: ArchiveTree, _ position: Int) -> FileAttributes {
        let member = tree.index.members[position]
        return FileAttributes(inode: tree.inode(of: position), isDirectory: member.kind == .directory,
                              size: UInt64(member.size), cachedBytes: 0, modificationTime: member.modificationTime,
                              kernelCacheSeconds: settings.directoryCacheTime.seconds, mode: member.mode,
                              isSymlink: member.kind == .symlink)
    }

    /// Calls `reply` with the tree and folder number that folder `inode` is, when it is an archive's folder or a
    /// folder inside one, once the archive is indexed; false (and no call) for any other inode.
    private func withArchiveFolder(_ inode: UInt64,
                                   reply: @escaping @Sendable (Result<(ArchiveTree, Int), FileSystemError>) -> Void)
        -> Bool {
        if let (slot, position) = ArchiveTree.member(of: inode) {
            guard let (tree, _) = archives.tree(slot: slot) else { reply(.failure(.stale)); return true }
            guard let folder = tree.folder(ofMember: position) else { reply(.failure(.notADirectory)); return true }
            reply(.success((tree, folder)))
            return true
        }
        guard let item = archiveItem(inode), let format = archiveFormat(of: item) else { return false }
        archives.whenIndexed(item: item.inode, version: CacheStore.archiveVersion(of: item.metadata),
                             build: { slot in buildIndex(of: item, format: format, slot: slot) }) { result in
            reply(result.map { ($0, 0) })
        }
        return true
    }

    /// Looks `name` up in an archive's folder; false for any other `parent`.
    func lookupInArchive(parent: UInt64, name: String,
                         reply: @escaping @Sendable (Result<FileAttributes, FileSystemError>) -> Void) -> Bool {
        withArchiveFolder(parent) { [self] found in
            reply(found.flatMap { tree, folder in
                guard let child = tree.child(named: name, in: folder) else { return .failure(.notFound) }
                return .success(memberAttributes(tree, child))
            })
        }
    }

    /// Reads an archive's folder (see `readDirectory`); false for any other inode.
    func readArchiveDirectory(_ inode: UInt64, from start: Int, count: Int,
                              reply: @escaping @Sendable (Result<[DirectoryEntry], FileSystemError>) -> Void) -> Bool {
        withArchiveFolder(inode) { [self] found in
            reply(found.map { tree, folder in
                let children = tree.children[folder].dropFirst(start).prefix(count)
                return children.enumerated().map { offset, child in
                    let attributes = memberAttributes(tree, child)
                    return DirectoryEntry(position: start + offset, name: tree.index.members[child].path.last!,
                                          inode: attributes.inode, isDirectory: attributes.isDirectory,
                                          attributes: attributes)
                }
            })
        }
    }

    /// Whether the catalog's child `inode`, named `name`, shows as an archive's folder: the name is looked at first,
    /// so a directory read of a mount with archives looks up only the children named as archives.
    func isArchiveFolder(named name: String, inode: UInt64) -> Bool {
        (settings.archives || archives.anyMarked) && ArchiveFolders.format(ofName: name) != nil
            && archiveItem(inode) != nil
    }

    /// Whether `inode` is an archive's folder or a folder inside one.
    func isArchiveFolder(_ inode: UInt64) -> Bool {
        if let (slot, position) = ArchiveTree.member(of: inode) {
            return archives.tree(slot: slot)?.tree.folder(ofMember: position) != nil
        }
        return archiveItem(inode) != nil
    }

    /// The parent of a folder inside an archive, or of an archive's folder; nil for any other inode.
    func archiveParent(of inode: UInt64) -> UInt64? {
        if let (slot, position) = ArchiveTree.member(of: inode) {
            guard let (tree, item) = archives.tree(slot: slot), tree.parents.indices.contains(position) else {
                return Catalog.rootInode
            }
            let parent = tree.parents[position]
            return parent == 0 ? item : tree.inode(of: parent - 1)
        }
        return archiveItem(inode)?.parent
    }

    /// The target of symlink `inode`, a member of an archive.
    package func readLink(_ inode: UInt64) -> Result<String, FileSystemError> {
        guard let (slot, position) = ArchiveTree.member(of: inode) else { return .failure(.invalidArgument) }
        guard let (tree, _) = archives.tree(slot: slot), tree.index.members.indices.contains(position) else {
            return .failure(.stale)
        }
        guard let target = tree.index.members[position].linkTarget else { return .failure(.invalidArgument) }
        return .success(target)
    }

    // MARK: Members

    /// Opens a member of an archive, or refuses to open an archive's folder; false for any other inode.
    func openInArchive(_ inode: UInt64, reply: @escaping OpenReply) -> Bool {
        if archiveItem(inode) != nil {
            reply(.failure(.isADirectory))
            return true
        }
        guard let (slot, position) = ArchiveTree.member(of: inode) else { return false }
        guard let (tree, itemInode) = archives.tree(slot: slot), tree.index.members.indices.contains(position),
              let item = catalog.item(inode: itemInode) else {
            reply(.failure(.stale))
            return true
        }
        let member = tree.index.members[position]
        guard member.kind == .file else {
            reply(.failure(member.kind == .directory ? .isADirectory : .invalidArgument))
            return true
        }
        do {
            let entry = try entry(for: item, inUse: true)
            let source = CacheEntrySource(fileSystem: self, entry: entry, inode: item.inode)
            let reader = ArchiveMemberReader(source: source, archive: item.name, member: member,
                                             seekPoints: tree.index.seekPoints)
            // A member stored as one range is a view onto the archive's own handle, read as any file is (blocks,
            // readahead, replies from the cache's mapping); the others go through their reader.
            var view: (handle: UInt64, start: UInt64, end: UInt64)?
            if case .stored(let start, let length) = member.data, length == member.size, start >= 0,
               UInt64(start + length) <= entry.size {
                let maximum = ReadaheadWindow.maximum(configured: settings.readaheadMaximum, cacheCap: store.maxBytes)
                let opened = handles.open(inode: item.inode, entry: entry, readaheadMaximum: maximum) { _, _ in false }
                view = (opened.handle, UInt64(start), UInt64(start + length))
            }
            let handle = archives.open(ArchiveFolders.OpenMember(reader: reader, entry: entry, view: view))
            // A member's bytes never change for its inode: another version of the archive gets other inodes.
            reply(.success(OpenedFile(handle: handle, keepCache: true)))
        } catch {
            logger.error("cannot open the cache for \(item.name): \(error)")
            reply(.failure(.cacheUnusable(error)))
        }
        return true
    }

    /// Reads an open member; false for any other handle.
    func readArchiveMember(handle: UInt64, offset: UInt64, count: Int, reply: @escaping Reply) -> Bool {
        guard handle & ArchiveFolders.handleBit != 0 else { return false }
        guard let member = archives.member(handle: handle) else {
            reply(.failure(.badHandle))
            return true
        }
        if let view = member.view {
            readView(view, offset: offset, count: count, reply: reply)
            return true
        }
        member.queue.async {
            do {
                if let fault = member.fault { throw fault }
                reply(.success(.bytes(try member.reader.read(offset: Int64(clamping: offset), count: count))))
            } catch let error as ArchiveError {
                member.fault = error
                reply(.failure(.io(error.description)))
            } catch let error as FileSystemError {
                reply(.failure(error))
            } catch {
                reply(.failure(.io("\(error)")))
            }
        }
        return true
    }

    /// Reads bytes `offset..<offset+count` of a member stored at `view.start..<view.end` of its archive through
    /// the archive's handle `view.handle`, as RangeFS.read reads a file, but with no background fill: a member's
    /// read never makes its whole archive download.
    private func readView(_ view: (handle: UInt64, start: UInt64, end: UInt64), offset: UInt64, count: Int,
                          reply: @escaping Reply) {
        let start = min(view.start + offset, view.end)
        let length = Int(min(UInt64(count), view.end - start))
        guard case .blocks(let file, let plan, _) = handles.plan(view.handle, offset: start, count: length,
                                                              fillAfter: nil) else { return reply(.failure(.badHandle)) }
        let entry = file.entry
        if let diskAhead = plan.diskAhead { entry.prefetchFromDisk(diskAhead) }
        if plan.range.isEmpty {
            reply(.success(.bytes([])))
        } else {
            serve(plan.range, of: entry, inode: file.inode, counted: true, reply: reply)
        }
        if let networkAhead = plan.networkAhead, !networkAhead.isEmpty {
            scheduler.prefetch(entry, url: entry.header.url, blocks: entry.blocks(covering: networkAhead),
                               priority: .readahead)
        }
    }

    /// Closes an open member; false for any other handle.
    func releaseArchiveMember(_ handle: UInt64) -> Bool {
        guard handle & ArchiveFolders.handleBit != 0 else { return false }
        guard let member = archives.close(handle: handle) else { return true }
        if let view = member.view { _ = handles.close(view.handle) }
        member.entry.use.end()
        return true
    }

    // MARK: Indexes

    /// Builds the index of the archive `item` into `slot`: from the cache's kept index if it has one for this
    /// version, else by reading the archive through its cache entry (and keeping the index made).
    private func buildIndex(of item: CatalogItem, format: ArchiveIndex.Format, slot: UInt32) {
        // A listed file is probed first: its validators key the kept index.
        directories.whenValidated(item) { [self] validated in
            Self.archiveQueue.async { [self] in
                switch validated {
                case .failure(let error):
                    archives.finish(slot: slot, version: "", result: .failure(error), retry: true)
                case .success(let item):
                    let version = CacheStore.archiveVersion(of: item.metadata)
                    let (result, retry) = index(of: item, format: format, version: version, slot: slot)
                    archives.finish(slot: slot, version: version, result: result.map { ArchiveTree(index: $0, slot: slot) },
                                    retry: retry)
                }
            }
        }
    }

    /// The index of version `version` of `item`, and whether a failure may pass (the server was out of reach).
    private func index(of item: CatalogItem, format: ArchiveIndex.Format, version: String,
                       slot: UInt32) -> (Result<ArchiveIndex, FileSystemError>, retry: Bool) {
        let url = item.metadata.url
        // An unreadable or damaged kept index is as if none was kept: the archive is indexed again.
        if let saved = store.savedArchiveIndex(url: url, version: version), let kept = try? ArchiveIndex(decoding: saved) {
            return (.success(kept), false)
        }
        let entry: CacheEntry
        do {
            entry = try self.entry(for: item, inUse: true)
        } catch {
            return (.failure(.cacheUnusable(error)), true)
        }
        defer { entry.use.end() }
        let source = CacheEntrySource(fileSystem: self, entry: entry, inode: item.inode)
        archives.reading(source, slot: slot)
        let limits = ArchiveLimits()
        do {
            let index = switch format {
            case .zip: try ZipIndexReader(source: source, archive: item.name, limits: limits).index()
            case .tar: try TarIndexReader(source: source, archive: item.name, limits: limits).index()
            case .tarGzip: try TarGzipIndexReader(source: source, archive: item.name, limits: limits).index()
            case .iso9660: try ISO9660Reader(source: source, archive: item.name, limits: limits).index()
            }
            if index.refusedCount > 0, let first = index.refused.first {
                logger.warning("\(ArchiveError(archive: item.name, fault: .malformed("\(index.refusedCount) members left out, the first '\(first.name)': \(first.reason)")))")
            }
            do {
                try store.saveArchiveIndex(index.encoded(), url: url, version: version)
            } catch {
                logger.warning("cannot keep the index of archive \(item.name) in the cache (it is made again at the next mount): \(error)")
            }
            return (.success(index), false)
        } catch let error as ArchiveError {
            return (.failure(.io(error.description)), false)
        } catch let error as FileSystemError {
            // The archive could not be read (its server out of reach, a fetch failed): tried again at next use.
            if case .io(let message) = error {
                return (.failure(.io("archive \(item.name): cannot read it: \(message)")), true)
            }
            return (.failure(error), true)
        } catch {
            return (.failure(.io("archive \(item.name): \(error)")), false)
        }
    }

    // MARK: Extended attributes

    /// How the index of `item`, an archive shown as a folder, stands (`rangefs status`); nil for any other file.
    func archiveReport(of item: CatalogItem) -> String? {
        archiveFormat(of: item) == nil ? nil : archives.report(item: item.inode)
    }

    /// `user.rangefs.archive` of an archive's folder (how its index stands); members have none. Nil for any other
    /// inode.
    func archiveExtendedAttribute(_ name: String, of inode: UInt64) -> Result<String, FileSystemError>? {
        if ArchiveTree.member(of: inode) != nil { return .failure(.noSuchAttribute) }
        guard name == "user.rangefs.archive", archiveItem(inode) != nil else { return nil }
        return .success(archives.report(item: inode))
    }
}
