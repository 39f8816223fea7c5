// Keeping the cache under `--cache-max-size`: least-recently-used blocks go first. The bookkeeping lives in the
// store's ledger (StoreLedger.swift), which every entry holds: a block stored makes room through it, without its store.
//
// Every use of a block (stored, or read by a program) takes the next value of a clock and appends a record to a
// queue; the block keeps the stamp of its last use. Eviction pops records from the front: a record whose block
// has a newer stamp was superseded and is skipped, so the first valid record is the least recently used block.
// The queue is compacted when half of it is consumed. Room is made before a block is written, so the cache never
// holds more than the cap plus the block being written. Pinned files, and blocks in flight, awaited or being
// served, are never evicted. Only the files of the running mount count towards the cap.

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
    func reserveRoom(for bytes: Int) {
        guard let maxBytes else { return }
        eviction.withLock { queue in
            while queue.usedBytes + bytes > maxBytes && queue.head < queue.records.count {
                let record = queue.records[queue.head]
                queue.head += 1
                guard let entry = record.entry, entry.stamp(of: record.block) == record.stamp else { continue }
                let freed = entry.evict(record.block, stamp: record.stamp)
                queue.usedBytes -= freed
                metrics.add("rangefs_evicted_bytes_total", UInt64(freed))
            }
            queue.usedBytes += bytes
        }
    }

    /// Adjusts the cached total by `delta` bytes (a block stored, an entry opened or dropped).
    func account(_ delta: Int) {
        guard maxBytes != nil else { return }
        eviction.withLock { $0.usedBytes += delta }
    }

    /// Bytes cached by this mount's files, as counted for the cap.
    var usedBytes: Int { eviction.withLock { $0.usedBytes } }
}
