// What an entry tells the LRU eviction of its ledger (StoreLedger+Eviction): when each block was last used, which
// blocks a reply is copying right now, and whether the file is pinned. `evict` drops one block if nothing uses it.
import RangeFSSystem

/// An entry's marks for eviction.
struct EvictionMarks {
    /// The ledger's clock value at each block's last use.
    var stamps: [UInt64]
    /// Blocks being copied to a reader right now; eviction leaves them alone.
    var serving: [Range<Int>] = []
    /// Pinned files are never evicted.
    var pinned = false
    /// Whether eviction already took blocks of this entry (logged once).
    var evictedBefore = false
    /// Handles the kernel reads through itself (FUSE passthrough): their file must stay whole, so nothing of it
    /// is evicted while one is open.
    var passthroughHandles = 0
    /// The current or last background fill pass (CacheEntry+FillPass.swift).
    var fillPass: FillPass?
    /// What the LRU queue's records name this entry by (StoreLedger+Dormant.swift), made at its first recorded use.
    var ticket: EvictionTicket?

    init(blockCount: Int) {
        stamps = Array(repeating: 0, count: blockCount)
    }

    func isServing(_ index: Int) -> Bool { serving.contains { $0.contains(index) } }
}

extension CacheEntry {
    package var isPinned: Bool { state.withLock { $0.eviction.pinned } }

    /// A handle of this file opened in passthrough mode: no block is evicted until `endPassthrough`.
    package func beginPassthrough() { state.withLock { $0.eviction.passthroughHandles += 1 } }
    package func endPassthrough() { state.withLock { $0.eviction.passthroughHandles -= 1 } }

    /// Whether every block is present, durable (committed) and checked against its CRC by this process (written
    /// by it, or read back since the mount), and the entry current: only such a file may be handed to the kernel
    /// to read itself. The kernel reads holes as zeros and checks no CRC, so a block rotted on disk since it was
    /// written is first caught by a normal read (and fetched again), never passed through.
    package var isDurablyComplete: Bool {
        state.withLock { state in
            !state.stale && state.blocks.durable.isFull && state.blocks.verified.isFull && !state.changedSinceCommit
        }
    }
    /// Whether the file is whole and checked, and only the writer and a commit keep it from `isDurablyComplete`:
    /// every block is present and checked, or received and waiting for the writer, and not all are committed.
    /// An open then waits for both, so that it can pass the file through.
    package var awaitsCommitToPassThrough: Bool {
        state.withLock { state in
            // Received blocks are neither present nor checked until written; every present block of this
            // process is checked.
            !state.stale && state.blocks.verified.setCount + state.unwritten.count == blockCount
                && (!state.blocks.durable.isFull || state.changedSinceCommit || !state.unwritten.isEmpty)
        }
    }

    package func setPinned(_ pinned: Bool) {
        state.withLock { $0.eviction.pinned = pinned }
        if pinned { ledger.notePinned(self) }
    }

    /// Records that `blocks` were used at `stamp` (the ledger's clock), for LRU eviction; returns the ticket the
    /// queue's records name this entry by. Called under the ledger's eviction lock.
    func touch(_ blocks: Range<Int>, stamp: UInt64) -> EvictionTicket {
        state.withLock { state in
            for index in blocks { state.eviction.stamps[index] = stamp }
            if let ticket = state.eviction.ticket { return ticket }
            let ticket = EvictionTicket(entry: self)
            state.eviction.ticket = ticket
            return ticket
        }
    }

    /// What the ledger keeps of this entry once it is released (`StoreLedger.park`), read under one lock: its
    /// ticket (nil if no block of it was ever recorded), the stamps of its blocks (0 for absent ones, so their
    /// records count as outdated) and its cached bytes. Nil if it changed since its last commit (an eviction).
    func parkedState() -> (ticket: EvictionTicket?, stamps: [UInt64], cachedBytes: Int)? {
        state.withLock { state in
            guard !state.changedSinceCommit else { return nil }
            let present = state.blocks.present
            let stamps = state.eviction.stamps.indices.map { present.contains($0) ? state.eviction.stamps[$0] : 0 }
            return (state.eviction.ticket, stamps, Int(geometry.bytes(in: present)))
        }
    }

    /// Takes over the ticket and stamps of this file's entry released earlier (`StoreLedger.adopt`), for the
    /// blocks that are present.
    func adopt(_ ticket: EvictionTicket, stamps: [UInt64]) {
        state.withLock { state in
            state.eviction.ticket = ticket
            for index in stamps.indices where state.blocks.present.contains(index) {
                state.eviction.stamps[index] = stamps[index]
            }
        }
    }

    /// The stamp of block `index`, to tell a current LRU record from an outdated one.
    func stamp(of index: Int) -> UInt64 { state.withLock { $0.eviction.stamps[index] } }

    /// Marks `range` as being copied to a reader (the reply reads the data file), so eviction skips it.
    package func beginServing(_ range: Range<Int>) { state.withLock { $0.eviction.serving.append(range) } }

    package func endServing(_ range: Range<Int>) {
        state.withLock { state in
            if let index = state.eviction.serving.firstIndex(of: range) { state.eviction.serving.remove(at: index) }
        }
    }

    /// Drops block `index` from the cache if nothing uses it: not pinned, not in flight, not awaited, not being
    /// served, and still last used at `stamp`. The hole is punched under the lock, so a refetch of the block cannot
    /// be overwritten by it. The slot on disk catches up at the next commit; if a crash comes first, the block
    /// reads as zeros, fails its CRC and is fetched again. Returns the bytes freed.
    func evict(_ index: Int, stamp: UInt64) -> Int {
        state.withLock { state -> Int in
            guard mayEvict(index, stamp: stamp, in: state) else { return 0 }
            let range = byteRange(of: index..<(index + 1))
            do {
                try dataFile.punchHole(range)
            } catch {
                logger.warning("cannot free block \(index) of \(directory): \(error)")
                return 0
            }
            state.blocks.evicted(index)
            state.changedSinceCommit = true
            if !state.eviction.evictedBefore {
                state.eviction.evictedBefore = true
                logger.notice("dropping least recently used blocks of \(Redaction.redact(header.url)) to stay under --cache-max-size; they are fetched again when read")
            }
            return Int(range.count)
        }
    }

    /// The bytes `evict` would free now, without evicting: for a fill looking for room (`hasRoomForFill`).
    func evictableBytes(_ index: Int, stamp: UInt64) -> Int {
        state.withLock { state in mayEvict(index, stamp: stamp, in: state) ? length(ofBlock: index) : 0 }
    }

    /// Whether nothing uses block `index`: not pinned, not in flight, not awaited, not being served, and still
    /// last used at `stamp`.
    private func mayEvict(_ index: Int, stamp: UInt64, in state: borrowing State) -> Bool {
        !state.eviction.pinned && state.eviction.passthroughHandles == 0 && !state.stale
            && state.eviction.stamps[index] == stamp
            && state.blocks.isEvictable(index) && !state.eviction.isServing(index)
    }
}
