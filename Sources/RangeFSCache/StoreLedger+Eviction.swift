// Keeping the cache under `--cache-max-size`: least-recently-used blocks go first. The bookkeeping lives in the
// store's ledger (StoreLedger.swift), which every entry holds: a block stored makes room through it, without its store.
//
// Every use of a block (stored, or read by a program) takes the next value of a clock and appends a record to a
// queue; the block keeps the stamp of its last use. Eviction pops records from the front: a record whose block
// has a newer stamp was superseded and is skipped, so the first valid record is the least recently used block.
// The queue holds O(cached blocks) records, however often they are read (issue 46): once it holds more than twice
// the records found current at its last compaction (plus a small slack), `recordUse` drops the outdated ones and
// the consumed front in one pass. A pass costs the queue's length and comes after at least as many appends as it
// kept, so it is amortised O(1) per use; without it a working set below the cap that is read again and again
// would grow the queue by one record per block read, forever. Room is made before a block is written, so the cache never
// holds more than the cap plus the block being written. Pinned files, and blocks in flight, awaited or being
// served, are never evicted. Only the files of the running mount count towards the cap.
//
// Background fill evicts less (CacheEntry+FillPass.swift): never a block used since its pass began, and never for a
// file that cannot fit. Records are appended in clock order, so the blocks a pass may evict are a prefix of the
// queue: those with a stamp below the pass's start.

import Synchronization

/// The LRU bookkeeping of a store with a size cap.
struct EvictionQueue {
    struct Record {
        /// Whose block: an open entry, or one released while idle (StoreLedger+Dormant.swift).
        let ticket: EvictionTicket
        let block: Int
        let stamp: UInt64
    }

    var clock: UInt64 = 0
    var records: [Record] = []
    var head = 0
    /// How many records were current after the last compaction (`compactIfLong`).
    var keptAtCompaction = 0
    /// The released entries whose blocks are still cached and counted, by URL (StoreLedger+Dormant.swift).
    var dormant: [String: EvictionTicket] = [:]
    /// Bytes cached by the entries this store opened.
    var usedBytes: Int = 0
    /// The pinned files, whose whole size is kept out of the room a fill may count on (`refusalToFill`).
    var pinned: [PinnedFile] = []

    struct PinnedFile {
        weak var entry: CacheEntry?
        let size: Int
    }
}

extension StoreLedger {
    /// Records that `blocks` of `entry` were just used; they become the most recently used.
    package func recordUse(_ entry: CacheEntry, blocks: Range<Int>) {
        guard maxBytes != nil, !blocks.isEmpty else { return }
        eviction.withLock { queue in
            queue.clock += 1
            let stamp = queue.clock
            let ticket = entry.touch(blocks, stamp: stamp)
            for index in blocks { queue.records.append(EvictionQueue.Record(ticket: ticket, block: index, stamp: stamp)) }
            queue.compactIfLong()
        }
    }

    /// Evicts least recently used blocks until `bytes` more fit under the cap (as far as anything is evictable),
    /// and counts them as used: a block is counted from when it is received, not when it is written, so blocks on
    /// their way to the disk cannot overshoot the cap. Give them back with `account(-bytes)` if they never land.
    /// Returns false if it evicted a block used at or after `sparing` (a fill pass's start) to make the room.
    /// A block of a released entry (StoreLedger+Dormant.swift) is next: its entry is opened again first, with its
    /// blocks' stamps, and evicted as any other. An entry that cannot be opened again leaves the queue.
    @discardableResult
    func reserveRoom(for bytes: Int, sparing: UInt64? = nil) -> Bool {
        guard let maxBytes else { return true }
        var spared = true
        while true {
            switch reserveRoomOfOpenEntries(for: bytes, maxBytes: maxBytes, sparing: sparing, spared: &spared) {
            case .done: return spared
            case .reopen(let url): reopenDormant(url)
            }
        }
    }

    private enum Step { case done, reopen(String) }

    /// Evicts blocks of open entries until `bytes` fit, or until a released entry's block is next.
    private func reserveRoomOfOpenEntries(for bytes: Int, maxBytes: Int, sparing: UInt64?, spared: inout Bool) -> Step {
        eviction.withLock { queue in
            while queue.usedBytes + bytes > maxBytes && queue.head < queue.records.count {
                let record = queue.records[queue.head]
                if case .dormant = record.holder {
                    // Its entry opens again, outside this lock, and the record is evicted then (`reserveRoom`).
                    return Step.reopen(record.ticket.url)
                }
                queue.head += 1
                guard case .open(let entry) = record.holder else { continue }
                let freed = entry.evict(record.block, stamp: record.stamp)
                if freed > 0, let sparing, record.stamp >= sparing { spared = false }
                queue.usedBytes -= freed
                metrics.add("rangefs_evicted_bytes_total", UInt64(freed))
            }
            queue.usedBytes += bytes
            return Step.done
        }
    }

    /// Whether `bytes` more fit under the cap, counting as room only the free bytes and the blocks that could be
    /// evicted and were last used before `sparing` (a fill pass's start). Looks no further than it must, and drops
    /// the outdated records it passes at the queue's front (eviction would skip them anyway).
    func hasRoomForFill(_ bytes: Int, sparing: UInt64) -> Bool {
        guard let maxBytes else { return true }
        return eviction.withLock { queue in
            var room = maxBytes - queue.usedBytes
            var index = queue.head
            while room < bytes && index < queue.records.count && queue.records[index].stamp < sparing {
                let record = queue.records[index]
                index += 1
                switch record.holder {
                case .open(let entry): room += entry.evictableBytes(record.block, stamp: record.stamp)
                case .dormant(let geometry): room += geometry.length(ofBlock: record.block)
                case .outdated: if index == queue.head + 1 { queue.head = index }
                }
            }
            return room >= bytes
        }
    }

    /// The ledger's clock now: a block used from now on gets a larger stamp.
    var clock: UInt64 { eviction.withLock { $0.clock } }

    /// `entry` is pinned: its whole size is kept out of the room other files' fills count on.
    func notePinned(_ entry: CacheEntry) {
        guard maxBytes != nil else { return }
        eviction.withLock { queue in
            guard !queue.pinned.contains(where: { $0.entry === entry }) else { return }
            queue.pinned.append(EvictionQueue.PinnedFile(entry: entry, size: Int(entry.size)))
        }
    }

    /// Why `entry` must not be filled: it is larger than the cap less the other pinned files (a pinned file's
    /// whole size counts, as it is to be completed and kept). Nil without a cap, or if it fits.
    package func refusalToFill(_ entry: CacheEntry) -> FillRefusal? {
        guard let maxBytes else { return nil }
        let pinned = eviction.withLock { queue -> Int in
            queue.pinned.removeAll { $0.entry == nil }
            return queue.pinned.filter { $0.entry !== entry && $0.entry?.isStale == false }.reduce(0) { $0 + $1.size }
        }
        return Int(entry.size) > maxBytes - pinned ? .largerThanCache(cap: maxBytes, pinned: pinned) : nil
    }

    /// Adjusts the cached total by `delta` bytes (a block stored, an entry opened or dropped).
    func account(_ delta: Int) {
        guard maxBytes != nil else { return }
        eviction.withLock { $0.usedBytes += delta }
    }

    /// Bytes cached by this mount's files, as counted for the cap.
    var usedBytes: Int { eviction.withLock { $0.usedBytes } }
}
