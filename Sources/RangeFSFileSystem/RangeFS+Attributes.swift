// What `stat`, `ls -l`, `du` and `getfattr` see of a RangeFS file: its size, date and cached bytes, and the
// `user.rangefs.*` extended attributes. Nothing here opens a cache entry or sends a request.
//
// How long the kernel may keep them: a listed file's, as long as its listing is fresh while its entry is closed
// (a second `ls -l` of 100,000 files then costs the daemon nothing), since cached bytes change only through an
// open entry; zero while the entry is open, so `ls -s` and `du` follow a download as it happens. An entry opens
// for many reasons besides an open (the first bytes of the open's probe, a fill, a prefetch of a directory's next
// files), often after the kernel was handed attributes to keep: so whenever one opens, the kernel is told to drop
// the attributes it holds of that file (`EntryOpener.entryOpened`), and asks again from then on. Without that, `stat -c %b` of
// a file just read whole stayed 0 for the listing's minute (issue 35). An entry that is complete and that nothing
// takes blocks from (`cachedBytesSettled`: no cap, no digest check) changes nothing they show: it keeps them open
// or not, and its opening tells the kernel nothing (issue 46: a re-read cached tree sent three GETATTRs a file).
import RangeFSCatalog
import RangeFSSystem

extension RangeFS {
    // MARK: Attributes

    public func attributes(of inode: UInt64) -> Result<FileAttributes, FileSystemError> {
        if let archived = archiveAttributes(of: inode) { return archived }
        if let directory = catalog.directory(inode: inode) {
            // A web directory's attributes never change; the kernel checks them on every path walk through it
            // (each `stat` of `ls -l` in a 100,000-file directory). Other folders and the root keep theirs 1 s:
            // a stat may then be answered from them for a second after the daemon died (statvfs never is).
            let keep = directory.url != nil && inode != Catalog.rootInode ? settings.directoryCacheTime.seconds : 1
            return .success(FileAttributes(inode: inode, isDirectory: true, size: 0, cachedBytes: 0,
                                           modificationTime: directory.modificationTime ?? mountTime,
                                           kernelCacheSeconds: keep))
        }
        guard let item = catalog.item(inode: inode) else {
            // A file that left its server's listing but is still open: the version its handles read.
            guard let entry = handles.entry(openOn: inode) else {
                return .failure(.notFound)
            }
            return .success(FileAttributes(inode: inode, isDirectory: false, size: entry.size,
                                           cachedBytes: entry.cachedBytes,
                                           modificationTime: entry.remoteMetadata.modificationTime ?? mountTime))
        }
        return .success(attributes(ofFile: item))
    }

    /// The attributes of the file `item`, as the catalog holds it now: `readdirplus` has it at hand already, and
    /// rebuilding it from the catalog cost a URL, a date and an ETag as text per entry of `ls -l`.
    func attributes(ofFile item: CatalogItem) -> FileAttributes {
        if let folder = archiveFolderAttributes(item) { return folder }
        let cached = cachedBytes(of: item)
        // Without a length, the size is what the stream has brought so far; reads go past it (direct I/O).
        return FileAttributes(inode: item.inode, isDirectory: false,
                              size: item.metadata.sizeKnown ? item.metadata.size : cached, cachedBytes: cached,
                              modificationTime: item.shownModificationTime ?? mountTime,
                              kernelCacheSeconds: kernelCacheSeconds(of: item))
    }


    /// How much of `item` is cached. No entry is opened for this: `ls -l` of a library would make one for every
    /// file. A listed file that no probe has seen counts a cached copy of the size its listing states.
    func cachedBytes(of item: CatalogItem) -> UInt64 {
        // Of unknown size: its entry's whole blocks streamed so far (its own shape: a capacity, or the size once the
        // stream ended and before the catalog heard of it).
        if !item.metadata.sizeKnown, let open = store.openEntry(for: item.metadata.url), !open.isStale {
            return open.cachedBytes
        }
        return store.cachedBytes(of: item.metadata, matchingSizeOnly: !item.validated)
    }

    // MARK: Extended attributes

    static let attributeNames = [
        "user.rangefs.url", "user.rangefs.state", "user.rangefs.progress", "user.rangefs.cached_bytes",
        "user.rangefs.etag", "user.rangefs.passthrough_handles", "user.rangefs.digest",
    ]

    public func extendedAttributeNames(of inode: UInt64) -> Result<[String], FileSystemError> {
        if catalog.directory(inode: inode) != nil || ArchiveTree.member(of: inode) != nil { return .success([]) }
        guard catalog.item(inode: inode) != nil else { return .failure(.notFound) }
        return .success(Self.attributeNames + (archiveItem(inode) != nil ? ["user.rangefs.archive"] : []))
    }

    public func extendedAttribute(_ name: String, of inode: UInt64) -> Result<String, FileSystemError> {
        // `ls -l` asks every file for security.selinux. "Not supported" (not "no such attribute") makes it ask no
        // other file of the mount (coreutils remembers a device without security labels): 100,000 round trips
        // fewer for an `ls -l` of 100,000 files. Only `user.rangefs.*` attributes exist here.
        guard name.hasPrefix("user.") else { return .failure(.attributeNotSupported) }
        if let archived = archiveExtendedAttribute(name, of: inode) { return archived }
        guard let listed = catalog.item(inode: inode) else {
            return .failure(catalog.directory(inode: inode) != nil ? .noSuchAttribute : .notFound)
        }
        guard Self.attributeNames.contains(name) else { return .failure(.noSuchAttribute) }
        let item = itemShown(listed)
        let cached = cachedBytes(of: item)
        let size = item.metadata.size
        switch name {
        case "user.rangefs.url": return .success(Redaction.redact(item.metadata.url))
        case "user.rangefs.etag": return .success(item.metadata.etag)
        case "user.rangefs.passthrough_handles": return .success(String(handles.usage(of: inode).passthrough))
        case "user.rangefs.cached_bytes": return .success(String(cached))
        case "user.rangefs.digest": return .success(digestState(of: item).short)
        case "user.rangefs.progress" where !item.metadata.sizeKnown: return .success("size unknown")
        case "user.rangefs.progress": return .success(Self.percent(cached, of: size))
        case "user.rangefs.state" where digestState(of: item).failed: return .success("error: digest mismatch")
        case "user.rangefs.state":
            return .success(cached == size && item.metadata.sizeKnown ? "complete" : cached == 0 ? "empty" : "partial")
        default: return .failure(.noSuchAttribute)
        }
    }

    /// `cached` of `size` as a percentage with one decimal, e.g. "42.5%"; an empty file is "100.0%".
    static func percent(_ cached: UInt64, of size: UInt64) -> String {
        guard size > 0 else { return "100.0%" }
        let tenths = cached * 1000 / size
        return "\(tenths / 10).\(tenths % 10)%"
    }
}
