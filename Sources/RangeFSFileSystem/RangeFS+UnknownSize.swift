// A file whose server sends no length has no size until its body ends. The block pipeline streams it into an entry
// of unknown size, which the store reshapes when the body ends or outgrows the entry's capacity
// (CacheStore+SettledSize.swift); this is the file system's side of that.
//
// Reads: a handle of such a file is opened with direct I/O (the kernel asks past the size it was told, 0 or the
// bytes so far) and reads through whichever entry the stream is in now: the one of a capacity while the size is
// unknown, the one of the size once it is known. A read below the capacity waits for its blocks as any read does;
// the stream's end reshapes the entry, and the readers it leaves waiting (`.replaced`) ask again, now clipped at
// the size (a short read, or 0 bytes at the end). A read past the capacity waits on the entry for its reshape
// (`whenReshaped`, no timer) and asks again. A stream that fails fails both.
//
// Once the size is known, the catalog takes it and the kernel drops the attributes it holds; handles open on the
// old entry move to the new one, so that its stream is wanted and its blocks counted as used.
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension RangeFS {
    /// Opens `item`, of unknown size, on `entry`: direct I/O, no passthrough, no kernel cache.
    func openUnknownSize(_ item: CatalogItem, entry: CacheEntry) -> Result<OpenedFile, FileSystemError> {
        let (handle, _) = handles.open(inode: item.inode, entry: entry, readaheadMaximum: 0) { _, _ in false }
        if settings.prefetch == .open || settings.prefetch == .all { scheduler.fill(entry, url: item.metadata.url) }
        return .success(OpenedFile(handle: handle, keepCache: false, directIO: true))
    }

    /// Reads `count` bytes at `offset` of the file of unknown size at `url` (inode `inode`), through its current
    /// entry; `reply` runs once.
    func readUnknownSize(_ url: String, inode: UInt64, offset: UInt64, count: Int, pid: Int32,
                         reply: @escaping Reply) {
        let entry: CacheEntry
        do {
            guard let current = try currentEntry(of: url, inode: inode) else { return reply(.failure(.stale)) }
            entry = current
        } catch {
            logger.error("cannot open the cache for \(Redaction.redact(url)): \(error)")
            return reply(.failure(.cacheUnusable(error)))
        }
        let again: @Sendable () -> Void = { [weak self] in
            guard let self else { return reply(.failure(.io("the file system is shutting down"))) }
            readUnknownSize(url, inode: inode, offset: offset, count: count, pid: pid, reply: reply)
        }
        let end = min(offset + UInt64(count), entry.size)
        if offset < end {
            // Below the capacity (or the size): its blocks. The stream's end may leave them waiting: ask again.
            return serve(offset..<end, of: entry, inode: inode, counted: true, pid: pid, reply: reply,
                         whenReplaced: entry.header.sizeKnown ? nil : again)
        }
        if entry.header.sizeKnown { return reply(.success(.bytes([]))) }  // at or past the end
        // Past the capacity: wait for the stream to grow or settle the entry, or to fail.
        let waiting = entry.whenReshaped { result in
            switch result {
            case .success where entry.wasReshaped: again()
            case .success: reply(.failure(.stale))  // the file changed on its server
            case .failure(let failure): reply(.failure(Self.fileSystemError(for: FetchError(failure))))
            }
        }
        guard waiting else { return entry.wasReshaped ? again() : reply(.failure(.stale)) }
        scheduler.startStream(entry, url: url)  // unless one runs: it must pass the capacity
    }

    /// `item` as it shows: of the size its stream ended at when the store's report of that end still waits in the
    /// queue (`EntryOpener.settledEntry`, which lets the catalog learn it now). A stream that a fill or a reader of
    /// its first bytes took to its end showed as "partial" in `getfattr` and `status` until the report came.
    func itemShown(_ item: CatalogItem) -> CatalogItem {
        guard !item.metadata.sizeKnown, opener.settledEntry(of: item) != nil else { return item }
        return catalog.item(inode: item.inode) ?? item
    }

    /// The entry a read of the file at `url` of unknown size goes through now: the open one, whatever its shape,
    /// else the one of the catalog's version. Nil if the file left the mount.
    /// An open entry of a size is the one the stream ended in: the catalog learns the size here if the store's
    /// report of it still waits in the queue, so that a reader that reached the end finds the file of that size
    /// (its attributes, its state) at once: `cat f; getfattr f` never saw it still streaming.
    private func currentEntry(of url: String, inode: UInt64) throws(CacheError) -> CacheEntry? {
        let item = catalog.item(inode: inode)
        if let item, let settled = opener.settledEntry(of: item) { return settled }
        if let open = store.openEntry(for: url), !open.isStale { return open }
        guard let item else { return nil }
        return try entry(for: item)
    }


    /// `old`, an entry of unknown size, was reshaped into `new`: settled at its size (the file learns it), or grown
    /// (its size is still unknown: nothing changes for the kernel). The handles open on `old` read `new` from now.
    /// The store lent `new` one use per handle open on `old` when it reshaped it (`lent`, EntryUse.lendHandles), so
    /// that its stream was wanted before this report came; the handles moved now take those over.
    func entryReshaped(_ old: CacheEntry, into new: CacheEntry, lent: Int) {
        let moved = handles.replaceEntry(old, with: new)
        for _ in 0..<moved { old.use.end() }
        // Handles closed meanwhile ended on `old`: the uses lent for them end; one opened on `old` since begins.
        for _ in moved..<max(moved, lent) { new.use.end() }
        for _ in lent..<max(lent, moved) { new.use.begin() }
        guard new.header.sizeKnown else { return }
        opener.learnSize(new.remoteMetadata)
    }


    /// Whether the file at `url` is being streamed now into an entry of unknown size.
    func isStreaming(_ url: String) -> Bool {
        guard let entry = store.openEntry(for: url), !entry.header.sizeKnown else { return false }
        return entry.state.withLock { $0.streaming }
    }
}
