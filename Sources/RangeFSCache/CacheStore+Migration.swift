// Cache format v1 to v2 (CacheFormat.swift), lazily: a v1 folder is migrated when its entry is opened, so a mount
// stays O(1) in the cache's size. Every step is durable before the next, and the whole is idempotent: a crash
// anywhere leaves either the v1 folder with `header` and `data` (which wins over v2 files of the same URL: it is
// newer, or the migration of it did not finish, and is done again), or v2 files and a folder without `data`
// (leftovers of a finished migration, removed at the next open).
//
//   small  its data, CRCs and bits are written whole into a v2 one-file entry (temp file, fsync, rename, fsync
//          of the shard), then the folder is removed;
//   large  `.meta` is written durably (temp file, rename), `data` is renamed to `.data` (the blocks are not
//          copied), the shard is flushed, then the folder is removed.
//
// Before the one pipeline (issue 46), a file without a length streamed into a v1-shaped folder's `stream` file. A
// completed one became a v1 entry there and migrates like any other; an unfinished one (`stream`, `stream-state`)
// is dropped here: such a file now streams into an entry of unknown size, from byte 0, as it would have anyway
// after another version of the file.

import Glibc
import RangeFSSystem
import Synchronization

extension CacheStore {
    /// The v1 files of an entry, and an unfinished stream's of an older rangefs (dropped).
    private static let legacyFiles = ["data", "header", "bitmap", "crc32c", "digest", "stream", "stream-state"]

    /// Migrates the v1 folder of `files`' URL to v2 if it holds an entry, and removes a v1 folder's leftovers.
    func migrateLegacyEntry(_ files: EntryFiles) throws(SystemError) {
        let folder = files.legacyFolder
        guard mayHoldLegacyFolders.load(ordering: .relaxed), access(folder, F_OK) == 0 else { return }
        guard access(folder + "/data", F_OK) == 0, let headerBytes = try FileSystemCalls.readSmallFile(folder + "/header")
        else {
            try removeLegacyFiles(folder)
            return
        }
        let header: CacheHeader
        do {
            header = try CacheHeader.decode(headerBytes)
        } catch {
            logger.warning("damaged cache header in \(folder) (\(error)); starting this entry empty")
            try removeLegacyFiles(folder)
            return
        }
        // As a v1 open read it: bits only with a CRC file of the right length and data of the header's size.
        var present = loadBitmap(folder: folder, header: header) ?? BlockBitmap(blockCount: header.blockCount)
        let data = try SystemFile(path: folder + "/data", flags: O_RDONLY)
        var crcBytes = try FileSystemCalls.readSmallFile(folder + "/crc32c", limit: 1 << 30) ?? []
        if try data.status().size != header.size || crcBytes.count != header.blockCount * 4 {
            present = BlockBitmap(blockCount: header.blockCount)
            crcBytes = [UInt8](repeating: 0, count: header.blockCount * 4)
        }
        var (meta, layout) = MetaBlock.initial(for: header)
        meta.replaceSubrange(layout.crcTableOffset..<(layout.crcTableOffset + crcBytes.count), with: crcBytes)
        let slot = MetaSlot(sequence: 1, generation: header.generation, answeredAt: header.answeredAt,
                            etagRetired: false, present: present)
        let slotStart = layout.slotOffset(1)
        meta.replaceSubrange(slotStart..<(slotStart + layout.slotLength), with: slot.encoded())
        _ = try FileSystemCalls.makeDirectory(files.shard)
        if EntryFiles.isSmall(size: header.size) {
            let offset = EntryFiles.metaOffset(size: header.size)
            var bytes = try data.read(at: 0, count: Int(header.size))
            bytes += [UInt8](repeating: 0, count: Int(offset) - bytes.count)
            bytes += meta + EntryFooter(metaOffset: offset).encoded()
            for path in [files.dataPath, files.metaPath] { try FileSystemCalls.removeFile(path) }
            try FileSystemCalls.replaceAtomically(files.base, with: bytes)
        } else {
            try FileSystemCalls.removeFile(files.base)
            try FileSystemCalls.replaceAtomically(files.metaPath, with: meta)
            try retryingEINTR("rename", files.dataPath) { rename(folder + "/data", files.dataPath) }
        }
        if let digest = try FileSystemCalls.readSmallFile(folder + "/digest") {
            try FileSystemCalls.replaceAtomically(files.digestPath, with: digest)
        } else {
            try FileSystemCalls.removeFile(files.digestPath)
        }
        try FileSystemCalls.synchronizeDirectory(containing: files.base)
        try removeLegacyFiles(folder)
        logger.debug("migrated the cache entry \(folder) to \(files.base)")
    }

    /// Removes a v1 folder's entry files, and the folder once empty.
    package func removeLegacyFiles(_ folder: String) throws(SystemError) {
        // `data` before `header`: a folder with a header and no data is leftovers, never an entry.
        for name in Self.legacyFiles { try FileSystemCalls.removeFile(folder + "/" + name) }
        // A kill between a v1 commit's temp bitmap and its rename left the temp: it goes with the folder.
        FileSystemCalls.removeTemporaryFiles(in: folder)
        // Not empty: files of someone else's; it is no entry.
        _ = rmdir(folder)
    }
}
