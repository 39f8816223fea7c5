// Entries cost memory only while they are used. A library of 10,000 files must not keep 10,000 entries open
// (each a block table, a mapping and pooled files): an entry nobody has used for `idleEntryTime` is released
// once it is quiet (nothing awaited, in flight, unwritten or uncommitted) and no work is queued for it (a fill, a
// transfer, a digest check: counted on the entry by whoever has it, `EntryUse.addWork`); the next use opens it again from its files. Under a size cap (`maxBytes`) too (issue 46: 100,000
// files read once would otherwise keep 100,000 entries, their descriptors and mappings, past `vm.max_map_count`):
// a released entry's blocks stay counted and in the LRU queue under its ticket, and eviction reaching them opens
// it again (`reopenParked`) to evict them as any other (StoreLedger+Dormant.swift).
//
// What is cached of a file whose entry is not open is answered without opening it, for `ls -l`, `du` and
// `status`: the entry's header and newest slot (or v1 bitmap) on disk are read once, and the count is remembered until the entry
// opens again (entries change only while open, and only this process writes them). A released entry leaves its
// count here.
//
// Races: an entry is counted as used (`entryInUse`) and touched by `entry(for:)` under the entries lock, and the
// release re-checks both under that lock before it removes the entry; so an entry is never released while a
// handle holds it or right after someone asked for it.

import RangeFSSystem
import Synchronization

/// The cached bytes of an entry that is not open, and which version of the file they belong to.
struct EntrySummary {
    let metadata: RemoteMetadata
    let cachedBytes: UInt64
    /// The recorded verdict of the file's end-to-end check (read only for a complete file).
    var digest: DigestRecord?
}

/// What is known of entries that are not open: their summaries, and the URLs that have none in the cache or one
/// that holds nothing, which answer alike (remembered too: `ls -l` of 100,000 files would otherwise look on disk for each, every time). The absent ones
/// are kept as 128-bit keys, not URLs: the catalog keeps no URL string per listed file (FileTable.swift), and a
/// copy of each here cost some 120 bytes per file after `ls -l`.
struct EntrySummaries {
    var known: [String: EntrySummary] = [:]
    var absent: Set<AbsentKey> = []
    /// What the latest summaries' reads found, for the opens that follow them.
    var loadedAhead = LoadedAhead()

    /// A URL's UTF-8 bytes hashed twice with different salts: two URLs share a key with a chance of about n²/2¹²⁹,
    /// and a shared key would only show a cached file as holding nothing until it opens.
    struct AbsentKey: Hashable {
        let first: Int
        let second: Int

        init(_ url: String) {
            var text = url
            var one = Hasher(), two = Hasher()
            one.combine(0)
            two.combine(1)
            // SAFETY: the buffer is the string's own contiguous UTF-8, alive for the closure and only read in it.
            text.withUTF8 { one.combine(bytes: UnsafeRawBufferPointer($0)) }
            // SAFETY: as above.
            text.withUTF8 { two.combine(bytes: UnsafeRawBufferPointer($0)) }
            (first, second) = (one.finalize(), two.finalize())
        }
    }
}

extension CacheStore {
    /// How many bytes of `metadata`'s version of its file are cached, without opening an entry. With
    /// `matchingSizeOnly`, any cached version of the same size counts: a listed file that no probe has seen yet
    /// has no validators to compare (its open probes it before anything is read).
    package func cachedBytes(of metadata: RemoteMetadata, matchingSizeOnly: Bool = false) -> UInt64 {
        func describes(_ cached: RemoteMetadata) -> Bool {
            matchingSizeOnly ? cached.size == metadata.size : cached.describesSameContent(as: metadata)
        }
        if let entry = openEntry(for: metadata.url), !entry.isStale {
            return describes(entry.remoteMetadata) ? entry.cachedBytes : 0
        }
        guard let summary = summary(of: metadata.url), describes(summary.metadata) else { return 0 }
        return summary.cachedBytes
    }

    /// What the entry of `url` that is not open holds: remembered, or read from its files once and remembered.
    private func summary(of url: String) -> EntrySummary? {
        // Most files asked about (a large listing's) have no entry: the index of names says so first, before any
        // lookup by URL. A remembered summary is of an entry on disk, so its name is in the index.
        guard mayHoldEntry(for: url) else { return nil }
        let remembered = summaries.withLock { summaries -> EntrySummary?? in
            if let summary = summaries.known[url] { return .some(summary) }
            return summaries.absent.contains(EntrySummaries.AbsentKey(url)) ? .some(nil) : nil
        }
        return remembered ?? readSummary(of: url)
    }

    /// The recorded verdict of the end-to-end check of `metadata`'s version of its file (open or not), without
    /// opening an entry; nil if it was not checked.
    /// `matchingSizeOnly` as for `cachedBytes(of:matchingSizeOnly:)`.
    package func storedDigest(of metadata: RemoteMetadata, matchingSizeOnly: Bool = false) -> DigestRecord? {
        func describes(_ cached: RemoteMetadata) -> Bool {
            matchingSizeOnly ? cached.size == metadata.size : cached.describesSameContent(as: metadata)
        }
        if let entry = openEntry(for: metadata.url), !entry.isStale {
            return describes(entry.remoteMetadata) ? entry.digestRecord : nil
        }
        guard let summary = summary(of: metadata.url), describes(summary.metadata) else { return nil }
        return summary.digest
    }

    /// The version of `url` that the cache holds (its open entry's, or its entry's on disk), without opening an
    /// entry; nil if it holds none. Through the summaries: a re-read tree asks this of each file its walk-ahead
    /// reaches, then `ls -l` and the open ask what it holds, and each read the entry's files again.
    package func storedVersion(of url: String) -> RemoteMetadata? {
        if let entry = openEntry(for: url), !entry.isStale { return entry.remoteMetadata }
        return summary(of: url)?.metadata
    }

    /// Reads the header and present set of `url`'s entry on disk and remembers what they say. A missing, unreadable or
    /// damaged header counts as no entry: nothing of it can be served.
    private func readSummary(of url: String) -> EntrySummary? {
        let since = summaries.withLock { $0.loadedAhead.current }
        // No header, or a damaged one, is no entry (see above); `rangefs verify` reports the damage.
        guard let stored = storedEntry(for: url) else {
            summaries.withLock { _ = $0.absent.insert(EntrySummaries.AbsentKey(url)) }
            return nil
        }
        let header = stored.header, present = stored.present
        let geometry = BlockGeometry(blockSize: header.blockSize, size: header.size)
        let digest = present.isFull ? loadDigestRecord(path: stored.digestPath, generation: header.generation) : nil
        let summary = EntrySummary(metadata: header.remoteMetadata, cachedBytes: geometry.bytes(in: present),
                                   digest: digest)
        // Kept for the open only if no entry of it is open now: what an open entry's files say on disk may be
        // behind it, and one that is closed without a release (a stale one) is not forgotten here.
        let isOpen = entries.withLock { $0[url] != nil }
        summaries.withLock { summaries in
            // A read overtaken by a change of the files (`rangefs evict` deleting them meanwhile) is not kept: it
            // would show them as they were until the next change.
            guard !summaries.loadedAhead.overtaken(url, since: since) else { return }
            summaries.known[url] = summary
            if !isOpen, let loaded = stored.loaded {
                let read = LoadedAhead.Read(loaded: loaded, digest: present.isFull ? .some(digest) : nil)
                summaries.loadedAhead.keep(read, of: url, since: since)
            }
        }
        return summary
    }

    /// Releases the entries that have been idle for `idleEntryTime`, and, beyond `idleEntryLimit` entries that nobody
    /// holds, the least recently used of them whatever their age (see the top of this file). Runs with the group
    /// commit.
    func releaseIdleEntries() {
        let cutoff = entries.withLock { releaseCutoff(in: $0) }
        func untouched(_ entry: CacheEntry) -> Bool {
            !entry.use.isHeld && entry.use.lastActivity <= cutoff
        }
        let candidates = entries.withLock { $0.values.filter(untouched) }
        guard !candidates.isEmpty else { return }
        var released = 0
        for entry in candidates where entry.isIdle && !entry.use.hasWork {
            let url = entry.header.url
            let removed = entries.withLock { table -> Bool in
                // Under the entries lock: an opening of the file after this finds the entry parked. The ledger
                // declines an entry that eviction changed since `isIdle` looked (it is committed first).
                guard table[url] === entry, untouched(entry), ledger.park(entry) else { return false }
                table[url] = nil
                // Also under it: an opening that forgets the summary comes after this, never before.
                remember(entry)
                // An entry that holds nothing (its blocks evicted under a cap, or never fetched) is no entry: its
                // files go, so that a cap bounds the disk, not only the data (100,000 small files read once under
                // a 200 MiB cap kept a file each: 585 MiB). Under the lock, so no opening reads them meanwhile;
                // a crash before the unlink leaves an entry whose slot says it holds nothing, the same.
                if entry.cachedBytes == 0 && entry.digestRecord == nil {
                    do {
                        try entry.files.removeFiles()
                    } catch {
                        logger.debug("cannot remove the empty cache entry \(entry.files.base): \(error)")
                    }
                }
                return true
            }
            guard removed else { continue }
            // Anything that still holds it (a status being computed) reads it; nothing fetches into it again.
            entry.markStale()
            released += 1
        }
        if released > 0 { logger.debug("released \(released) idle cache entries") }
    }

    /// The `lastActivity` at or before which an entry nobody holds is released: `idleEntryTime` ago, or later when
    /// more than `idleEntryLimit` such entries are open, so that the most recently used `idleEntryLimit` stay.
    private func releaseCutoff(in table: [String: CacheEntry]) -> Int {
        let idleSince = EntryUse.milliseconds() - Int(settings.idleEntryTime.seconds * 1000)
        guard table.count > settings.idleEntryLimit else { return idleSince }
        var unheld = table.values.filter { !$0.use.isHeld }
            .map { $0.use.lastActivity }
        guard unheld.count > settings.idleEntryLimit else { return idleSince }
        unheld.sort()
        // Entries used in the same millisecond as the last one released go too: a few more than needed at most.
        return max(idleSince, unheld[unheld.count - settings.idleEntryLimit - 1])
    }

    /// What a released entry holds, kept for `cachedBytes(of:)` and `storedDigest(of:)`. An entry that holds nothing
    /// and has no verdict answers as no entry does (0 bytes, no digest), so it is kept as a key, not a summary: a
    /// mount that reads 100,000 files once under a cap would otherwise keep a URL and validators per file evicted.
    private func remember(_ entry: CacheEntry) {
        let url = entry.header.url, cachedBytes = entry.cachedBytes, digest = entry.digestRecord
        summaries.withLock { summaries in
            summaries.loadedAhead.forget(url)
            if cachedBytes == 0 && digest == nil {
                summaries.known[url] = nil
                summaries.absent.insert(EntrySummaries.AbsentKey(url))
            } else {
                summaries.known[url] = EntrySummary(metadata: entry.remoteMetadata, cachedBytes: cachedBytes, digest: digest)
            }
        }
    }

    /// Opens the released entry of `url` again from its files, for eviction (StoreLedger+Dormant.swift). Nothing to
    /// do if its header is gone or damaged: the ledger then drops it from the queue. Returns whether it opened.
    func reopenParked(_ url: String) -> Bool {
        // No header, or a damaged one: nothing of it can be evicted, nor served.
        guard let header = storedEntry(for: url)?.header else { return false }
        do {
            _ = try entry(for: header.remoteMetadata, blockSize: header.blockSize)
            return true
        } catch {
            logger.warning("cannot open the cache entry of \(Redaction.redact(url)) to evict its blocks: \(error)")
            return false
        }
    }

    /// The present blocks of `metadata`'s version as its entry says (open, or its newest slot on disk); nil if the
    /// cache holds no entry of that version. For status maps: read when asked, not kept.
    /// `matchingSizeOnly` as for `cachedBytes(of:matchingSizeOnly:)`.
    package func storedPresentBlocks(of metadata: RemoteMetadata, matchingSizeOnly: Bool = false) -> BlockBitmap? {
        func describes(_ cached: RemoteMetadata) -> Bool {
            matchingSizeOnly ? cached.size == metadata.size : cached.describesSameContent(as: metadata)
        }
        if let entry = openEntry(for: metadata.url), !entry.isStale {
            return describes(entry.remoteMetadata) ? entry.presentBlocks : nil
        }
        // No header, or a damaged one: nothing of the file is cached.
        guard let stored = storedEntry(for: metadata.url), describes(stored.header.remoteMetadata) else { return nil }
        return stored.present
    }

    /// Forgets what was remembered of `url`'s entry (it opens, or its files are made or deleted): every path
    /// that makes an entry calls this, so the index of names on disk learns of it here too.
    package func forgetSummary(of url: String) {
        let key = EntryIndex.Key(url: url)
        entryIndex.withLock { $0.insert(key) }
        summaries.withLock { summaries in
            summaries.known[url] = nil
            summaries.absent.remove(EntrySummaries.AbsentKey(url))
            summaries.loadedAhead.forget(url)
        }
    }

    /// Whether the cache holds no entry at all, open or on disk (a fresh cache, or one whose files were never
    /// read): then no file has a byte cached, and a directory read need not name each file's entry to say so.
    package func holdsNoEntries() -> Bool {
        guard entries.withLock({ $0.isEmpty }) else { return false }
        if let empty = entryIndex.withLock({ $0.isRead ? $0.surelyEmpty : nil }) { return empty }
        let read = EntryIndex.keys(root: root)
        return entryIndex.withLock { index in
            index.adopt(read)
            return index.surelyEmpty
        }
    }

    /// Whether the cache may hold an entry of `url` on disk: false only when its name is surely not in
    /// `entries/` (EntryIndex.swift). The first call reads the names, outside the index's lock: an open that makes
    /// an entry meanwhile adds its name (under the entries' lock, which must not wait for a read of a whole
    /// cache), and the names read are added to it, not put in its place.
    func mayHoldEntry(for url: String) -> Bool {
        let key = EntryIndex.Key(url: url)
        if let known = entryIndex.withLock({ $0.isRead ? $0.mayHold(key) : nil }) { return known }
        let read = EntryIndex.keys(root: root)
        return entryIndex.withLock { index in
            index.adopt(read)
            return index.mayHold(key)
        }
    }
}
