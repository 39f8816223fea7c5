// A file whose server sends no length is cached in an entry of a capacity (CacheFormat.swift, header version 3)
// until its body ends. Its size is then known, and the entry is rewritten at that size: the small layout (one
// file) at or under `EntryFiles.smallLimit`, else its `.data` cut to the size beside a new `.meta`. The blocks it
// holds keep their bytes and their CRCs; the last block, shorter than a block, is the stream's last bytes.
//
// Crash safety: a kill at any point leaves the old entry, the new one, or an entry that starts empty, never a mix.
// A small file is made under a temporary name, flushed, and renamed in; it is looked for before a `.meta`
// (EntryFiles.load), so once it is in, the old `.data` and `.meta` are leftovers, removed next. A large entry's
// `.data` is cut and flushed first, which makes the old `.meta` (of the capacity) one whose data file has another
// length, an entry that starts empty; its new `.meta`, flushed under a temporary name, then replaces it by rename.

import Glibc

extension CacheStore {
    /// `entry`, of a file whose size was not yet known, holds the whole file: `size` bytes, every block before the
    /// last present, and `lastBlock` the bytes of the last block when `size` is not a multiple of the block size
    /// (empty when it is). Rewrites its files at that size, closes `entry` (its waiters get `.replaced`: the
    /// entry of the size, returned, serves them) and returns the entry of the size, every block present.
    ///
    /// The caller gives the catalog the size before another open of the file's unknown size comes: such an open
    /// would find the entry of a size, another shape, and start it over (CacheStore+EntryFiles, `reuseEntry`).
    /// Nothing else writes the entry meanwhile: its one writer is the stream that ended.
    func settleSize(of entry: CacheEntry, size: UInt64, lastBlock: [UInt8]) throws(CacheError) -> CacheEntry {
        let old = entry.header
        let whole = Int(size / UInt64(old.blockSize))
        guard !old.sizeKnown, size <= old.size, lastBlock.count == Int(size % UInt64(old.blockSize)) else {
            throw .unsettledSize(url: old.url, size: size, reason: "its entry is not one of unknown size that holds it")
        }
        waitForWrites()
        let (present, tableCRCs) = entry.state.withLock { ($0.blocks.present, $0.crcs) }
        if let missing = (0..<whole).first(where: { !present.contains($0) }) {
            throw .unsettledSize(url: old.url, size: size, reason: "block \(missing) is not cached")
        }
        var header = old
        header.size = size
        header.sizeKnown = true
        header.generation = UInt64.random(in: 1...UInt64.max)
        header.answeredAt = entry.answeredAt
        if entry.etagRetired.load(ordering: .relaxed) { header.etag = "" }
        var crcs = Array(tableCRCs.prefix(whole))
        if !lastBlock.isEmpty { crcs.append(CRC32C.checksum(lastBlock)) }
        let metaBytes = Self.settledMetaBlock(header, crcs: crcs)
        let files = entryFiles(for: old.url)
        // Under the lock opens of this URL take (none reads the files while they change) and the entry's commit
        // lock (no commit writes a slot of the capacity into the new `.meta`). Out of the table first, and with
        // nothing left to commit; stale (its waiters answered) only once both locks are let go.
        try ledger.opening(old.url).withLock { () throws(CacheError) in
            try entry.commitLock.withLock { () throws(CacheError) in
                forgetSummary(of: old.url)
                ledger.forgetParked(old.url)
                if entries.withLock({ $0[old.url] === entry ? $0.removeValue(forKey: old.url) : nil }) != nil {
                    ledger.account(-Int(entry.cachedBytes))
                }
                entry.state.withLock { $0.changedSinceCommit = false }
                do throws(SystemError) {
                    try rewrite(files, from: entry, size: size, lastBlock: lastBlock, metaBytes: metaBytes)
                } catch {
                    throw .system(error)
                }
            }
        }
        entry.markStale()
        var metadata = header.remoteMetadata
        metadata.answeredAt = header.answeredAt
        return try self.entry(for: metadata, blockSize: old.blockSize)
    }

    /// Writes the files of `entry`'s URL at `size` (see the top of this file for the order).
    private func rewrite(_ files: EntryFiles, from entry: CacheEntry, size: UInt64, lastBlock: [UInt8],
                         metaBytes: [UInt8]) throws(SystemError) {
        let whole = Int(size / UInt64(entry.header.blockSize)) * entry.header.blockSize
        if EntryFiles.isSmall(size: size) {
            var data = try entry.dataFile.read(at: 0, count: whole) + lastBlock
            guard data.count == Int(size) else { throw SystemError(call: "read", path: entry.dataFile.path, errno: .io) }
            let metaOffset = EntryFiles.metaOffset(size: size)
            data += [UInt8](repeating: 0, count: Int(metaOffset - size))
            let made = try FileSystemCalls.writeReplacement(
                for: files.base, with: data + metaBytes + EntryFooter(metaOffset: metaOffset).encoded(),
                synchronizing: true)
            try FileSystemCalls.moveReplacement(made, over: files.base)
            try FileSystemCalls.synchronizeDirectory(containing: files.base)
            for path in [files.dataPath, files.metaPath] { try FileSystemCalls.removeFile(path) }
        } else {
            if !lastBlock.isEmpty { try entry.dataFile.write(lastBlock, at: UInt64(whole)) }
            try entry.dataFile.truncate(to: size)
            try entry.dataFile.synchronizeData()
            try FileSystemCalls.replaceAtomically(files.metaPath, with: metaBytes)
        }
        try FileSystemCalls.synchronizeDirectory(containing: files.base)
    }

    /// The meta block of a settled entry: its header, `crcs` for its blocks, and slot B (sequence 1) with every
    /// block present.
    private static func settledMetaBlock(_ header: CacheHeader, crcs: [UInt32]) -> [UInt8] {
        var (bytes, layout) = MetaBlock.initial(for: header)
        var table = ByteWriter()
        for crc in crcs { table.write(crc) }
        bytes.replaceSubrange(layout.crcTableOffset..<(layout.crcTableOffset + 4 * crcs.count), with: table.bytes)
        var present = BlockBitmap(blockCount: header.blockCount)
        for index in 0..<header.blockCount { _ = present.insert(index) }
        let slot = MetaSlot(sequence: 1, generation: header.generation, answeredAt: header.answeredAt,
                            etagRetired: false, present: present)
        bytes.replaceSubrange(layout.slotOffset(1)..<layout.slotOffset(2), with: slot.encoded())
        return bytes
    }
}
