// Keeping the cache under `--cache-max-size`: least-recently-used blocks go first. The bookkeeping lives in the
// store's ledger (StoreLedger.swift), which every entry holds: a block stored makes room through it, without its store.
//
// Every use of a block (stored, or read by a program) takes the next value of a clock and appends a record to a
// queue; the block keeps the stamp of its last use. Eviction pops records from the front: a record whose block
// has a newer stamp was superseded and is skipped, so the first valid record is the least recently used block.
// The queue is compacted when half of it is consumed. Room is made before a block is written, so the cache never
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
        weak var entry: CacheEntry?
        let block: Int
        let stamp: UInt64
    }

    var clock: UInt64 = 0
    var records: [Record] = []
    var head = 0
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
    func recordUse(_ entry: CacheEntry, blocks: Range<Int>) {
        guard maxBytes != nil, !blocks.isEmpty else { return }
        eviction.withLock { queue in
            queue.clock += 1
            let stamp = queue.clock
            entry.touch(blocks, stamp: stamp)
            for index in blocks { queue.records.append(EvictionQueue.Record(entry: entry, block: index, stamp: stamp)) }
            if queue.head > 4096 && queue.head * 2 > queue.records.count {
                queue.records.removeFirst(queue.head)
                queue.head = 0
            }
        }
    }

    /// Evicts least recently used blocks until `bytes` more fit under the cap (as far as anything is evictable),
    /// and counts them as used: a block is counted from when it is received, not when it is written, so blocks on
    /// their way to the disk cannot overshoot the cap. Give them back with `account(-bytes)` if they never land.
    /// Returns false if it evicted a block used at or after `sparing` (a fill pass's start) to make the room.
    @discardableResult
    func reserveRoom(for bytes: Int, sparing: UInt64? = nil) -> Bool {
        guard let maxBytes else { return true }
        return eviction.withLock { queue in
            var spared = true
            while queue.usedBytes + bytes > maxBytes && queue.head < queue.records.count {
                let record = queue.records[queue.head]
                queue.head += 1
                guard let entry = record.entry, entry.stamp(of: record.block) == record.stamp else { continue }
                let freed = entry.evict(record.block, stamp: record.stamp)
                if freed > 0, let sparing, record.stamp >= sparing { spared = false }
                queue.usedBytes -= freed
                metrics.add("rangefs_evicted_bytes_total", UInt64(freed))
            }
            queue.usedBytes += bytes
            return spared
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
                guard let entry = record.entry, entry.stamp(of: record.block) == record.stamp else {
                    if index == queue.head + 1 { queue.head = index }
                    continue
                }
                room += entry.evictableBytes(record.block, stamp: record.stamp)
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
    func refusalToFill(_ entry: CacheEntry) -> FillRefusal? {
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
