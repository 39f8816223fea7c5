// The first bytes an open's probe brings (FirstBytes.swift) go into the file's entry, before the open answers.
// Bytes still streaming become the entry's blocks in flight: the scheduler adopts the probe's transfer, and a READ
// for them waits for its own block from that transfer, with no second request (ProbeBody.swift says why this way).
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension EntryOpener {
    /// Puts the first bytes of a file, which the probe of its open brings, into its entry: the blocks they cover,
    /// unless another transfer brings them already. Called before the open answers, so the entry is the one it opens.
    func store(firstBytes body: FirstBytes.Body, of metadata: RemoteMetadata) {
        if case .bytes(let bytes) = body, bytes.isEmpty { return }  // nothing to keep: no entry opens for it
        let entry: CacheEntry
        do {
            entry = try self.entry(for: CatalogItem(inode: 0, name: "", metadata: metadata))
        } catch {
            logger.error("cannot open the cache for \(Redaction.redact(metadata.url)): \(error)")
            return body.discard()
        }
        switch body {
        case .bytes(let bytes):
            store(bytes, in: entry)
        case .streaming(let rest):
            stream(rest, into: entry, url: metadata.url)
        }
    }

    /// Makes the blocks `rest` brings the entry's blocks in flight, fetched by the probe's own transfer.
    private func stream(_ rest: ProbeBody, into entry: CacheEntry, url: String) {
        // The entry's own block size (an entry made by an earlier mount may have another than this mount's).
        let blocks = entry.blocks(covering: rest.span)
        guard !blocks.isEmpty, entry.byteRange(of: blocks) == rest.span else {
            // Its blocks do not end where the probe does: its whole blocks are stored when it ended.
            return rest.collect { [self] bytes in store(bytes, in: entry) }
        }
        let claimed = entry.claim(blocks: blocks)
        if claimed == [blocks] {
            rest.hand(to: scheduler.adopt(entry, url: url, blocks: blocks))
            return
        }
        // Some are cached or on their way already (an earlier mount, another reader): the probe fills the ones
        // claimed here once it ended, and any it did not bring are fetched as usual, so that no reader waits for
        // a block nobody fetches.
        rest.collect { [self] bytes in
            let missing = put(bytes, into: entry, runs: claimed)
            if !missing.isEmpty { scheduler.fetch(entry, url: url, runs: missing, priority: .readahead) }
        }
    }

    /// Stores the blocks `bytes` (from offset 0) cover whole, or the file's last one, that nobody fetches yet.
    private func store(_ bytes: [UInt8], in entry: CacheEntry) {
        var covered = entry.blocks(covering: 0..<min(UInt64(bytes.count), entry.size))
        if let last = covered.last, entry.byteRange(of: last..<(last + 1)).upperBound > UInt64(bytes.count) {
            covered = covered.lowerBound..<last
        }
        guard !covered.isEmpty else { return }
        _ = put(bytes, into: entry, runs: entry.claim(blocks: covered))
    }

    /// Puts the blocks of `runs` (claimed) that `bytes` (from offset 0) hold whole into `entry`; returns the runs
    /// of those they do not hold, still claimed.
    private func put(_ bytes: [UInt8], into entry: CacheEntry, runs: [Range<Int>]) -> [Range<Int>] {
        var missing: [Int] = []
        // SAFETY: the pointer is used only inside the closure, while `bytes` is alive; each block copies its slice out.
        bytes.withUnsafeBytes { raw in
            for block in runs.joined() {
                let range = entry.byteRange(of: block..<(block + 1))
                guard range.upperBound <= UInt64(bytes.count) else {
                    missing.append(block)
                    continue
                }
                let buffer = BlockBuffer(capacity: Int(range.count), pool: store.bufferPool)
                // SAFETY: the range is one block of the entry, inside `bytes` (checked above).
                _ = buffer.append(UnsafeRawBufferPointer(rebasing: raw[Int(range.lowerBound)..<Int(range.upperBound)]))
                entry.put(block: block, buffer: buffer, background: false, budgeted: false)
            }
        }
        return BlockTable.runs(of: missing)
    }
}
