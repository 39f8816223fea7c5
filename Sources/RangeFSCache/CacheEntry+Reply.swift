// How a read's bytes reach the kernel. Present blocks are copied by the kernel straight out of a read-only
// mapping of the data file (one copy, no buffer per reply); blocks still in memory (just received, or unwritable)
// are sent from their buffers; a small entry is not mapped, and its replies are read with pread; where a file
// cannot be mapped, replies come from its descriptor (spliced) or as bytes gathered from both.
import RangeFSSystem

extension CacheEntry {
    /// How to answer a read of `range` whose blocks are readable: straight from the data file when all are on
    /// disk, else in segments from the file's mapping and from the buffers of blocks held in memory (or as bytes
    /// gathered from both, if the file is not mapped). Nil if a memory block was dropped meanwhile.
    ///
    /// Blocks that fill wrote with O_DIRECT are first asked for with WILLNEED, once: the kernel copies the reply
    /// out of the mapping, and a page not in the page cache is then faulted in on its own, one synchronous 4 KiB
    /// read per page once the mapping's readahead gives up. A cold copy that met fill's blocks ran at a third of
    /// its speed. Other blocks are in the page cache, or come there ahead of a sequential reader through
    /// `prefetchFromDisk` (advising every reply of a warm copy cost it a tenth of its speed).
    package func reply(for range: Range<UInt64>) -> ReadReply? {
        let blocks = self.blocks(covering: range)
        let found = state.withLock { state -> (buffers: [Int: BlockBuffer], uncached: [Int])? in
            var buffers: [Int: BlockBuffer] = [:]
            for index in blocks where !state.blocks.present.contains(index) {
                guard let buffer = state.unwritten[index]?.buffer ?? state.memory[index] else { return nil }
                buffers[index] = buffer
            }
            return (buffers, state.blocks.takeWrittenDirectly(blocks))
        }
        guard let (fromMemory, uncached) = found else { return nil }
        if mapping != nil {
            for run in BlockTable.runs(of: uncached) { dataFile.adviseWillNeed(byteRange(of: run)) }
        }
        if fromMemory.isEmpty {
            if let mapping {
                return .mapped(address: mapping.address + UInt(range.lowerBound), count: Int(range.count))
            }
            // A small entry's reply is read with one pread and sent with one writev: spliced from the descriptor
            // it cost three calls (vmsplice of the header, splice into the thread's pipe and out of it). A read
            // that fails is read again below, which reports it.
            if isSmall, let bytes = try? dataFile.read(at: range.lowerBound, count: Int(range.count)),
               bytes.count == Int(range.count) {
                return .bytes(bytes)
            }
            // The file cannot be opened now: the bytes are read below instead, which reports its own failure.
            if let lease = try? dataFile.lease() {
                return .file(lease, offset: range.lowerBound, count: Int(range.count))
            }
        }
        // Each block's part of `range`, with where it starts inside the block.
        let parts = blocks.map { index -> (Int, Range<UInt64>, Int) in
            let blockRange = byteRange(of: index..<(index + 1))
            let wanted = range.clamped(to: blockRange)
            return (index, wanted, Int(wanted.lowerBound - blockRange.lowerBound))
        }
        if let mapping {
            var segments: [ReplySegment] = []
            for (index, wanted, start) in parts {
                if let buffer = fromMemory[index] {
                    segments.append(ReplySegment(address: UInt(bitPattern: buffer.address) + UInt(start),
                                                 count: Int(wanted.count), owner: buffer))
                } else if let last = segments.last, last.owner == nil,
                          last.address + UInt(last.count) == mapping.address + UInt(wanted.lowerBound) {
                    segments[segments.count - 1].count += Int(wanted.count)
                } else {
                    segments.append(ReplySegment(address: mapping.address + UInt(wanted.lowerBound),
                                                 count: Int(wanted.count), owner: nil))
                }
            }
            return .segments(segments)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(range.count))
        for (index, wanted, start) in parts {
            if let buffer = fromMemory[index] {
                bytes += buffer.bytes[start..<(start + Int(wanted.count))]
            } else {
                do {
                    let read = try dataFile.read(at: wanted.lowerBound, count: Int(wanted.count))
                    guard read.count == Int(wanted.count) else { return nil }
                    bytes += read
                } catch {
                    logger.warning("cannot read cached bytes \(wanted) of \(directory): \(error)")
                    return nil
                }
            }
        }
        return .bytes(bytes)
    }

    /// Starts reading the cached bytes of `range` from disk in the background, and checking those from an earlier
    /// run, so that a sequential reader's next blocks come from the page cache, checked. Only present blocks are
    /// read: asking for a hole would fill the page cache with zero pages that the block's arrival then has to
    /// overwrite (on a cold copy that cost a tenth of the daemon's time).
    ///
    /// Blocks from an earlier run are left to `verifyAhead`, whose reads bring them in anyway. The others are read
    /// on the disk-ahead queue, off the READ path, with plain `pread` into a scratch buffer wherever the page cache
    /// lacks a page: the kernel's read path fills the page cache in large folios, where WILLNEED advice (and the
    /// mapping's page faults) allocate and account every 4 KiB page on its own. After a drop of the page cache
    /// that advice cost the daemon 0.36 CPU seconds per 512 MiB read, and pread 0.26.
    package func prefetchFromDisk(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        // A small entry has no mapping to tell which pages are in the page cache, and needs no reading ahead: its
        // blocks from an earlier run are read by their check (`verifyAhead`, or the one-pass check of a complete
        // file), and those written in this run are in the page cache already.
        if isSmall { return verifyAhead(range) }
        let (runs, direct) = state.withLock { state in
            let checked = blocks(covering: range).filter {
                state.blocks.present.contains($0) && state.blocks.verified.contains($0)
            }
            return (BlockTable.runs(of: checked.filter { !state.blocks.writtenDirectly.contains($0) }),
                    BlockTable.runs(of: checked.filter { state.blocks.writtenDirectly.contains($0) }))
        }
        if !runs.isEmpty || !direct.isEmpty {
            pipeline.diskAheadQueue.async { [self] in
                // Blocks that fill wrote with O_DIRECT during this copy are not in the page cache, and a cold
                // copy reads them once: advice brings them in without the copy a pread makes.
                for run in direct { dataFile.adviseWillNeed(byteRange(of: run).clamped(to: range)) }
                let chunk = 1 << 20
                // SAFETY: allocated and deallocated in this scope; only pread writes into it, at most `chunk` bytes.
                let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
                defer { scratch.deallocate() }
                for run in runs {
                    let bytes = byteRange(of: run).clamped(to: range)
                    for start in stride(from: bytes.lowerBound, to: bytes.upperBound, by: chunk) {
                        let part = start..<min(bytes.upperBound, start + UInt64(chunk))
                        if mapping?.isResident(part) == true { continue }
                        // A hint like the advice it replaces: a read that fails here fails again, and is
                        // reported, when a reply or a check needs these bytes.
                        // SAFETY: `part` is at most `chunk` bytes long, the scratch buffer's size.
                        _ = try? dataFile.read(into: UnsafeMutableRawBufferPointer(rebasing: scratch[0..<part.count]),
                                               at: part.lowerBound)
                    }
                }
            }
        }
        verifyAhead(range)
    }

    /// Reads present bytes with `pread`.
    package func readPresent(_ range: Range<UInt64>) throws(SystemError) -> [UInt8] {
        try dataFile.read(at: range.lowerBound, count: Int(range.count))
    }
}
