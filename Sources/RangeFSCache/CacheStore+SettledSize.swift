// A file whose server sends no length is cached in an entry of a capacity (CacheFormat.swift, header version 3)
// until its body ends. Its size is then known, and the entry is rewritten at that size: the small layout (one
// file) at or under `EntryFiles.smallLimit`, else its `.data` cut to the size beside a new `.meta`. A body that
// outgrows the capacity gets an entry of `capacityGrowth` times it, still of unknown size. Either way the blocks it
// holds keep their bytes and their CRCs; a settled entry's last block, shorter than a block, is the stream's end.
//
// Crash safety: a kill at any point leaves the old entry, the new one, or an entry that starts empty, never a mix.
// A small file is made under a temporary name, flushed, and renamed in; it is looked for before a `.meta`
// (EntryFiles.load), so once it is in, the old `.data` and `.meta` are leftovers, removed next. A large entry's
// `.data` is cut (or grown) and flushed first, which makes the old `.meta` one whose data file has another length,
// an entry that starts empty; its new `.meta`, flushed under a temporary name, then replaces it by rename.

import Dispatch
import Glibc
import RangeFSSystem

extension CacheStore {
    /// How many times larger the next capacity of a body that outgrew its entry is.
    static let capacityGrowth: UInt64 = 16

    /// `entry`, of a file whose size was not yet known, ended after `size` bytes, and `lastBlock` holds the bytes of
    /// its last block when `size` is not a multiple of the block size (empty when it is). Rewrites its files at that
    /// size, with the blocks it holds (under a cap, the stream's first blocks may be evicted: they stay absent, to
    /// be streamed again), closes `entry` (its waiters get `.replaced`: the entry of the size, returned, serves
    /// them) and returns the entry of the size.
    ///
    /// The caller gives the catalog the size before another open of the file's unknown size comes: such an open
    /// would find the entry of a size, another shape, and start it over (CacheStore+EntryFiles, `reuseEntry`).
    /// Nothing else writes the entry meanwhile: its one writer is the stream that ended.
    /// `announce` hears of the new entry before `entry`'s readers do (they ask again at once).
    func settleSize(of entry: CacheEntry, size: UInt64, lastBlock: [UInt8],
                    announce: (CacheEntry) -> Void = { _ in }) throws(CacheError) -> CacheEntry {
        let old = entry.header
        guard !old.sizeKnown, size <= old.size, lastBlock.count == Int(size % UInt64(old.blockSize)) else {
            throw .unsettledSize(url: old.url, size: size, reason: "its entry is not one of unknown size that holds it")
        }
        var header = old
        header.size = size
        header.sizeKnown = true
        return try reshape(entry, as: header, lastBlock: lastBlock, announce: announce)
    }

    /// `entry`, of a file whose size is not yet known, received more bytes than its capacity: rewrites it at
    /// `capacityGrowth` times that capacity, still of unknown size, with the blocks it holds; closes `entry` and
    /// returns the new one. The stream that outgrew it goes on into the new one (StreamStep.outgrew); a stream
    /// that starts later starts from byte 0 (without Range nothing else is possible) and checks the kept blocks
    /// against their CRCs as it passes them (`presentChecksum`).
    /// `streamGoesOn`: the stream that outgrew `entry` goes on into the new one, whose stream it is from before any
    /// reader of `entry` hears of the change (a reader would start another).
    func growCapacity(of entry: CacheEntry, streamGoesOn: Bool = false,
                      announce: (CacheEntry) -> Void = { _ in }) throws(CacheError) -> CacheEntry {
        var header = entry.header
        let (grown, overflow) = header.size.multipliedReportingOverflow(by: Self.capacityGrowth)
        guard !header.sizeKnown, !overflow, grown <= RemoteMetadata.largestSize else {
            throw .unsettledSize(url: header.url, size: header.size, reason: "its entry cannot grow past its capacity")
        }
        header.size = grown
        return try reshape(entry, as: header, lastBlock: [], streamGoesOn: streamGoesOn, announce: announce)
    }

    /// Rewrites `entry`'s files as an entry of `target`'s size (known or a capacity), keeping its present whole
    /// blocks that fit and adding `lastBlock` after them; returns the new entry, opened.
    private func reshape(_ entry: CacheEntry, as target: CacheHeader, lastBlock: [UInt8], streamGoesOn: Bool = false,
                         announce: (CacheEntry) -> Void) throws(CacheError) -> CacheEntry {
        let old = entry.header
        let whole = min(old.blockCount, Int(target.size / UInt64(old.blockSize)))
        waitForWrites()
        let (present, tableCRCs) = entry.state.withLock { ($0.blocks.present, $0.crcs) }
        var header = target
        header.generation = UInt64.random(in: 1...UInt64.max)
        header.answeredAt = entry.answeredAt
        if entry.etagRetired.load(ordering: .relaxed) { header.etag = "" }
        var kept = BlockBitmap(blockCount: header.blockCount)
        // A capacity not a multiple of the block size ends in a short block: not one of the next geometry's.
        for index in 0..<whole where present.contains(index) && entry.length(ofBlock: index) == old.blockSize {
            _ = kept.insert(index)
        }
        var crcs = (0..<header.blockCount).map { kept.contains($0) ? tableCRCs[$0] : 0 }
        if !lastBlock.isEmpty {
            crcs[whole] = CRC32C.checksum(lastBlock)
            _ = kept.insert(whole)
        }
        let metaBytes = Self.reshapedMetaBlock(header, crcs: crcs, present: kept)
        let files = entryFiles(for: old.url)
        // Under the lock opens of this URL take (none reads the files while they change) and the entry's commit
        // lock (no commit writes a slot of the old geometry into the new `.meta`). Out of the table first, and with
        // nothing left to commit; stale (its waiters answered) only once both locks are let go.
        let next = try ledger.opening(old.url).withLock { () throws(CacheError) -> CacheEntry in
            try entry.commitLock.withLock { () throws(CacheError) in
                forgetSummary(of: old.url)
                ledger.forgetParked(old.url)
                if entries.withLock({ $0[old.url] === entry ? $0.removeValue(forKey: old.url) : nil }) != nil {
                    ledger.account(-Int(entry.cachedBytes))
                }
                entry.state.withLock { $0.changedSinceCommit = false }
                do throws(SystemError) {
                    try rewrite(files, from: entry, as: header, whole: whole, lastBlock: lastBlock,
                                metaBytes: metaBytes)
                } catch {
                    throw .system(error)
                }
                // Again once the files changed: a summary read meanwhile (without this lock) read the old ones.
                forgetSummary(of: old.url)
            }
            // Opened under the same lock, before the old entry's readers hear that it is stale: an open of the URL
            // in between would find no entry in the table and the new files under the old shape.
            return try openEntryFiles(for: header.remoteMetadata, blockSize: old.blockSize)
        }
        if streamGoesOn { _ = next.beginWholeStream() }
        announce(next)
        entry.markReshaped()
        return next
    }

    /// Writes the files of `entry`'s URL as `header`'s (see the top of this file for the order).
    private func rewrite(_ files: EntryFiles, from entry: CacheEntry, as header: CacheHeader, whole: Int,
                         lastBlock: [UInt8], metaBytes: [UInt8]) throws(SystemError) {
        let size = header.size
        let wholeBytes = whole * header.blockSize
        if header.sizeKnown && EntryFiles.isSmall(size: size) {
            var data = try entry.dataFile.read(at: 0, count: wholeBytes) + lastBlock
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
            if !lastBlock.isEmpty { try entry.dataFile.write(lastBlock, at: UInt64(wholeBytes)) }
            try entry.dataFile.truncate(to: size)
            try entry.dataFile.synchronizeData()
            try FileSystemCalls.replaceAtomically(files.metaPath, with: metaBytes)
        }
        try FileSystemCalls.synchronizeDirectory(containing: files.base)
    }

    /// The meta block of a reshaped entry: its header, `crcs` for its blocks, and slot B (sequence 1) with the
    /// `present` blocks.
    private static func reshapedMetaBlock(_ header: CacheHeader, crcs: [UInt32], present: BlockBitmap) -> [UInt8] {
        var (bytes, layout) = MetaBlock.initial(for: header)
        var table = ByteWriter()
        for crc in crcs { table.write(crc) }
        bytes.replaceSubrange(layout.crcTableOffset..<(layout.crcTableOffset + 4 * crcs.count), with: table.bytes)
        let slot = MetaSlot(sequence: 1, generation: header.generation, answeredAt: header.answeredAt,
                            etagRetired: false, present: present)
        bytes.replaceSubrange(layout.slotOffset(1)..<layout.slotOffset(2), with: slot.encoded())
        return bytes
    }

    /// A whole-file stream of `entry`, of unknown size, ended after `size` bytes (`StreamStep.ended`), or outgrew
    /// its capacity (nil; `next` then gets the grown entry, whose blocks the going stream claims): settled, or
    /// grown, off the network's thread, since it waits for the writer and flushes; the owner hears of the new
    /// entry before the old one's readers and the stream go on into it.
    /// `old` was reshaped into `new`: `new` holds a use for each handle open on `old` at once, so that its stream
    /// is wanted and its blocks count as used before the file system, told through `reports`, moves the handles.
    private func reportReshape(_ old: CacheEntry, into new: CacheEntry) {
        let lent = old.use.lendHandles(to: new.use)
        guard let reports else {
            for _ in 0..<lent { new.use.end() }  // nobody moves the handles: nothing is lent
            return
        }
        reports.send(.reshaped(old: old, new: new, lent: lent))
    }

    func reshapeAfterStream(_ entry: CacheEntry, size: UInt64?, lastBlock: [UInt8], next: SettleHook.Next? = nil) {
        DispatchQueue.global().async { [self] in
            do {
                let reshaped: CacheEntry
                if let size {
                    reshaped = try settleSize(of: entry, size: size, lastBlock: lastBlock) { reportReshape(entry, into: $0) }
                    logger.info("\(Redaction.redact(entry.header.url)) is complete: \(size) bytes; its size is known from now on")
                } else {
                    reshaped = try growCapacity(of: entry, streamGoesOn: true) { reportReshape(entry, into: $0) }
                    logger.info("\(Redaction.redact(entry.header.url)) sends more than \(entry.header.size) bytes; its stream goes on into room for \(reshaped.header.size)")
                }
                next?(reshaped)
            } catch {
                // The entry stays as it was, its stream ended: the next one starts from byte 0 and finds the end again.
                logger.error("\(error)")
                entry.stream(.end)
                next?(nil)
            }
        }
    }
}
