// Opening an entry from its files, or making them (format: CacheFormat.swift and MetaBlock.swift), and reading
// what an entry on disk holds without opening it (for summaries, status and offline mounts). A v1 folder of the
// same URL is migrated first (CacheStore+Migration.swift), so an open entry is always in the v2 layout.

import Glibc
import RangeFSSystem

/// What an entry on disk holds, read without opening it.
package struct StoredEntry {
    /// The header, with the moment and a retired ETag of its newest slot applied.
    package var header: CacheHeader
    var present: BlockBitmap
    /// Where its digest record would be.
    var digestPath: String
    /// What was read of a v2 entry's files, for the open that may follow (LoadedAhead.swift); nil for a v1 folder.
    var loaded: EntryFiles.Loaded? = nil
}

/// Held while a missing shard folder is made (at most once per shard in a cache's life), so that entries new in
/// one shard at once make it once.
private let shardCreation = LockedBox(())

extension CacheStore {
    /// The files of `url`'s entry (EntryFiles.swift).
    package func entryFiles(for url: String) -> EntryFiles { EntryFiles(root: root, url: url) }

    /// The file that holds `url`'s cached data: its small entry's file, or its large entry's `.data` (whichever
    /// exists; the small one if neither does).
    public func dataPath(for url: String) -> String {
        let files = entryFiles(for: url)
        return access(files.dataPath, F_OK) == 0 ? files.dataPath : files.base
    }

    /// Opens the entry of `metadata` from its files (migrating a v1 folder first), or starts it empty.
    func openOrCreateEntry(for metadata: RemoteMetadata, blockSize: Int) throws(SystemError) -> CacheEntry {
        let files = entryFiles(for: metadata.url)
        // A name that the index of entries on disk surely lacks has no files in either layout (the index holds v1
        // folders' names too, and a stream's folder sets `mayHoldLegacyFolders`): made at once, without the two
        // lookups (its small file, its `.meta`) that would fail. A cold read of small files paid them per file.
        if !mayHoldLegacyFolders.load(ordering: .relaxed), let key = EntryIndex.Key(name: files.name),
           entryIndex.withLock({ $0.isRead && !$0.mayHold(key) }) {
            return try createEntry(files, for: metadata, blockSize: blockSize)
        }
        try migrateLegacyEntry(files)
        // What a summary just read of these files, if nothing changed them since (LoadedAhead.swift).
        let ahead = summaries.withLock { $0.loadedAhead.take(metadata.url) }
        let found = ahead.map { .entry($0.loaded) } ?? files.load()
        if let reused = try reuseEntry(files, found: found, digest: ahead?.digest, for: metadata) { return reused }
        if case .none = found {
            return try createEntry(files, for: metadata, blockSize: blockSize)
        }
        // Another version's files, of either size, or damaged ones: all go, durably, before the new ones are made.
        try files.removeFilesDurably()
        return try createEntry(files, for: metadata, blockSize: blockSize)
    }

    /// `digest`: the digest record if it was read with `found` (nil inside: there is none); nil: read it now.
    private func reuseEntry(_ files: EntryFiles, found: EntryFiles.Found, digest: DigestRecord??,
                            for metadata: RemoteMetadata) throws(SystemError) -> CacheEntry? {
        let loaded: EntryFiles.Loaded
        switch found {
        case .none:
            return nil
        case .damaged(let why):
            logger.warning("damaged cache entry \(files.base) (\(why)); starting this entry empty")
            return nil
        case .entry(let found):
            loaded = found
        }
        let header = loaded.meta.header
        // Another ETag alone, from a server known to rotate them, is the same version (RotatingETags.swift).
        let rotated = header.remoteMetadata.etagRotated(to: metadata) && ledger.rotatingETags.contains(metadata.url)
        // An entry whose size was not yet known when the file now has one is of another shape: its geometry covers
        // a capacity, not the size. It starts again; a whole-file stream checks its blocks. An entry of a size is
        // the one of a file without a length whose stream ended (the catalog may not have heard of it yet).
        guard header.url == metadata.url, header.sizeKnown == metadata.sizeKnown || header.sizeKnown,
              header.remoteMetadata.describesSameContent(as: metadata) || rotated else {
            logger.info("\(Redaction.redact(metadata.url)) changed on the server; dropping its cached data")
            return nil
        }
        // A small entry's file was just read whole to its footer; a large one's `.data` is looked at here.
        var status = stat()
        guard loaded.small || (stat(loaded.dataPath, &status) == 0 && UInt64(status.st_size) == header.size) else {
            logger.warning("the data file of \(files.base) is missing or of another size; starting this entry empty")
            return nil
        }
        let dataFile = descriptors.file(path: loaded.dataPath, flags: O_RDWR)
        let metaFile = loaded.small ? dataFile : descriptors.file(path: loaded.metaPath, flags: O_RDWR)
        let slot = loaded.meta.slot
        let location = CacheEntry.Location(files: files, isSmall: loaded.small, metaLayout: loaded.meta.layout,
                                           metaOffset: loaded.metaOffset, sequence: slot?.sequence ?? 0)
        // A slot is written only once the files are durable (CacheEntry+Commit.swift); files without one may be a
        // new entry's, left by a kill before its first commit, and are flushed by the next commit.
        let entry = CacheEntry(header: header, location: location, dataFile: dataFile, metaFile: metaFile,
                               durable: slot?.present ?? BlockBitmap(blockCount: header.blockCount),
                               crcs: loaded.meta.crcs,
                               digest: digest ?? loadDigestRecord(path: files.digestPath, generation: header.generation),
                               headerDurable: slot != nil, ledger: ledger, pipeline: pipeline, logger: logger)
        if rotated { entry.retireETag() }
        return entry
    }

    /// Starts an entry empty, in new files: files of another version are unlinked first, never truncated, so a
    /// handle still reading an old version through its old entry keeps reading the old bytes, never a mix. The
    /// new files are written without a flush: the first commit that writes a slot makes them durable first. When
    /// files were replaced, their removal is made durable at once, so that no crash can pair an old `.meta` with
    /// a new `.data`.
    private func createEntry(_ files: EntryFiles, for metadata: RemoteMetadata,
                             blockSize: Int) throws(SystemError) -> CacheEntry {
        var header = CacheHeader(
            blockSize: blockSize, size: metadata.sizeKnown ? metadata.size : CacheHeader.unsizedCapacity,
            generation: UInt64.random(in: 1...UInt64.max),
            url: metadata.url, etag: metadata.etag, lastModified: metadata.lastModified
        )
        header.answeredAt = metadata.answeredAt
        header.sizeKnown = metadata.sizeKnown
        let (metaBytes, layout) = MetaBlock.initial(for: header)
        // A file of unknown size is a large entry whatever its capacity: its small layout would put the meta
        // block where its next bytes go.
        let small = header.sizeKnown && EntryFiles.isSmall(size: header.size)
        let metaOffset = small ? EntryFiles.metaOffset(size: header.size) : 0
        // The files are made with O_EXCL, as if nothing were there (a cold read of many small files then pays no
        // failing lookup per file: SmallFilesTests): a missing shard is made, and files in the way (an empty one a
        // kill left, a `.data` whose `.meta` a crash removed) are removed, only when the create says so.
        func make() throws(SystemError) {
            if small {
                let footer = EntryFooter(metaOffset: metaOffset).encoded()
                try FileSystemCalls.createFile(files.base, with: metaBytes + footer, at: metaOffset)
            } else {
                try FileSystemCalls.createFile(files.metaPath, with: metaBytes)
                let data = try SystemFile(path: files.dataPath, flags: O_RDWR | O_CREAT | O_EXCL)
                try data.truncate(to: header.size)
            }
        }
        do {
            try make()
        } catch where error.errno == .noEntry {
            // New entries of one shard race to make it: the one that comes second finds it made, and makes no
            // folder that exists (a failing mkdir: SmallFilesTests).
            try shardCreation.withLock { _ throws(SystemError) in
                do throws(SystemError) {
                    try make()
                } catch where error.errno == .noEntry {
                    _ = try FileSystemCalls.makeDirectory(files.shard)
                    try make()
                }
            }
        } catch where error.errno == .exists {
            try files.removeFilesDurably()
            try make()
        }
        let dataFile = descriptors.file(path: small ? files.base : files.dataPath, flags: O_RDWR)
        let metaFile = small ? dataFile : descriptors.file(path: files.metaPath, flags: O_RDWR)
        let location = CacheEntry.Location(files: files, isSmall: small, metaLayout: layout, metaOffset: metaOffset,
                                           sequence: 0)
        return CacheEntry(header: header, location: location, dataFile: dataFile, metaFile: metaFile,
                          durable: BlockBitmap(blockCount: header.blockCount),
                          crcs: [UInt32](repeating: 0, count: header.blockCount), headerDurable: false,
                          ledger: ledger, pipeline: pipeline, logger: logger)
    }

    /// What the cache holds of `url` on disk, in either layout; nil if nothing, or nothing readable (a damaged
    /// entry holds nothing: `rangefs verify` reports it).
    package func storedEntry(for url: String) -> StoredEntry? {
        let files = entryFiles(for: url)
        let folder = files.legacyFolder
        if mayHoldLegacyFolders.load(ordering: .relaxed), access(folder + "/data", F_OK) == 0 {
            // Not migrated yet: its v1 files are what an open would use (CacheStore+Migration.swift).
            guard let bytes = try? FileSystemCalls.readSmallFile(folder + "/header"),  // unreadable: nothing
                  let header = try? CacheHeader.decode(bytes), header.url == url  // damaged: nothing
            else { return nil }
            let present = loadBitmap(folder: folder, header: header, quietly: true)
            return StoredEntry(header: header, present: present ?? BlockBitmap(blockCount: header.blockCount),
                               digestPath: folder + "/digest")
        }
        guard case .entry(let loaded) = files.load(), loaded.meta.header.url == url else { return nil }
        let header = loaded.meta.header
        return StoredEntry(header: header, present: loaded.meta.slot?.present ?? BlockBitmap(blockCount: header.blockCount),
                           digestPath: files.digestPath, loaded: loaded)
    }

    /// The digest record at `path` for the entry of `generation`; nil if there is none, it is damaged, or it
    /// belongs to another version.
    func loadDigestRecord(path: String, generation: UInt64) -> DigestRecord? {
        // No record, or an unreadable one, means the file is unchecked: it is checked again, which is safe.
        guard let bytes = try? FileSystemCalls.readSmallFile(path) else { return nil }
        do {
            let record = try DigestRecord.decode(bytes)
            return record.generation == generation ? record : nil
        } catch {
            logger.warning("damaged digest record \(path) (\(error)); the file will be checked again")
            return nil
        }
    }
}
