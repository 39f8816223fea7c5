// The LRU's records name an entry through a ticket, so that an entry released while idle (CacheStore+Idle.swift)
// keeps its place in the queue under a size cap without being kept open (issue 46). Each open entry holds one
// ticket, made at its first recorded use; records hold the ticket, the ticket holds the entry weakly.
//
// When an idle entry is released under a cap (`park`), its ticket keeps the URL, the stamps of its present blocks
// and the bytes it counts, and the ledger keeps the ticket by URL: the bytes stay counted (they are still on the
// disk) while the entry's block table, mappings and descriptors go. Its records stay valid as long as the stamps
// match. Eviction reaching such a record reopens the entry from its files (through the store's `reopen` hook, outside
// the eviction lock) and evicts the block as any other, committed as eviction does. Opening an entry (`adopt`)
// takes over its parked ticket: the new entry gets the old stamps, the ticket's bytes are given back (the opening
// counts what its files hold), and its records point at it again. So the queue never holds two live records of a
// block, and a parked entry costs a ticket and one stamp per cached block.
//
// Lock order: the store's entries lock comes before the eviction lock (`park` runs under both).

import Synchronization

/// Whose blocks a record of the LRU queue names. Its fields change only under the ledger's eviction lock.
final class EvictionTicket: @unchecked Sendable {
    // @unchecked Sendable: read and written only under the eviction lock of the one ledger that made it.
    weak var entry: CacheEntry?
    let url: String
    /// Set while the entry is released (parked): what the queue needs of it.
    var parked: ParkedEntry?

    init(entry: CacheEntry) {
        self.entry = entry
        url = entry.header.url
    }
}

/// A released entry whose blocks the cap still counts.
struct ParkedEntry {
    /// The stamp of each present block at the release, 0 for the others.
    var stamps: [UInt64]
    let geometry: BlockGeometry
    /// The bytes counted for it in `usedBytes`.
    let cachedBytes: Int
}

extension EvictionQueue.Record {
    enum Holder {
        case open(CacheEntry)
        case dormant(BlockGeometry)
        case outdated
    }

    /// Whether the record is its block's current one, and whose: an open entry's or a parked one's.
    var holder: Holder {
        if let parked = ticket.parked {
            return parked.stamps[block] == stamp ? .dormant(parked.geometry) : .outdated
        }
        guard let entry = ticket.entry, entry.stamp(of: block) == stamp else { return .outdated }
        return .open(entry)
    }
}

extension EvictionQueue {
    /// Drops the consumed front and the outdated records once the queue is more than twice as long as what was
    /// current at the last compaction (see StoreLedger+Eviction.swift).
    mutating func compactIfLong() {
        guard records.count > 2 * keptAtCompaction + 64 else { return }
        records = records[head...].filter { record in
            if case .outdated = record.holder { return false }
            return true
        }
        head = 0
        keptAtCompaction = records.count
    }
}

extension StoreLedger {
    /// `entry` is released while idle (under the store's entries lock): its cached blocks stay counted and in the
    /// queue, under its ticket. Without a cap nothing is counted; an entry with no block cached or recorded leaves
    /// the count and keeps no ticket (so files whose blocks were all evicted cost nothing). Returns false, and
    /// changes nothing, if the entry changed since its last commit: eviction may take a block of an open entry
    /// between the store's `isIdle` and this, and it is then released only once that is committed too. Its bytes
    /// and stamps are read under the eviction lock, so what is parked is what the count holds.
    func park(_ entry: CacheEntry) -> Bool {
        guard maxBytes != nil else { return true }
        return eviction.withLock { queue in
            guard let released = entry.parkedState() else { return false }
            guard released.cachedBytes > 0, let ticket = released.ticket else {
                queue.usedBytes -= released.cachedBytes
                return true
            }
            ticket.parked = ParkedEntry(stamps: released.stamps, geometry: entry.geometry, cachedBytes: released.cachedBytes)
            ticket.entry = nil
            queue.dormant[ticket.url] = ticket
            return true
        }
    }

    /// `entry` was just opened from its files: it takes over the ticket of its URL's parked entry, if any, whose
    /// bytes leave the count (the caller counts what the files hold). Returns the stamps it took over (0 for a
    /// block with no record), or nil.
    func adopt(_ entry: CacheEntry) -> [UInt64]? {
        guard maxBytes != nil else { return nil }
        return eviction.withLock { queue -> [UInt64]? in
            guard let ticket = queue.dormant.removeValue(forKey: entry.header.url), let parked = ticket.parked else {
                return nil
            }
            queue.usedBytes -= parked.cachedBytes
            ticket.parked = nil
            // A new version of the file (another block count) keeps nothing of the old one's records.
            guard parked.stamps.count == entry.blockCount else { return nil }
            ticket.entry = entry
            entry.adopt(ticket, stamps: parked.stamps)
            return parked.stamps
        }
    }

    /// The entry of `url` is closed (dropped or deleted): a parked entry of it leaves the queue and the count.
    func forgetParked(_ url: String) {
        guard maxBytes != nil else { return }
        eviction.withLock { queue in
            guard let ticket = queue.dormant.removeValue(forKey: url), let parked = ticket.parked else { return }
            queue.usedBytes -= parked.cachedBytes
            ticket.parked = nil
        }
    }

    /// Opens the parked entry of `url` again so that eviction can take its blocks. If it does not come back (its
    /// files are gone, or it changed), it leaves the queue: its records can never be evicted.
    func reopenDormant(_ url: String) {
        let hook = reopenHook.withLock { $0 }
        // Only if it did not open: once open it adopted its ticket, and it may be idle and parked again already
        // (its bytes counted again), which forgetting would take out of the count with its blocks still cached.
        if hook?.reopen(url) != true { forgetParked(url) }
    }
}
