// The catalog's files by inode number, in one array indexed by the number.
//
// Inode numbers are handed out from 2 upward and never reused (Catalog.swift), so the numbers of a mount's files
// are dense: an array holds 100,000 listed files in 100,000 slots, where a dictionary keyed by the number would
// hold them in up to 262,144 buckets of the same width (it grows at three quarters full). A directory's number, or
// a removed file's, is an empty slot.

struct InodeTable<Value> {
    /// The slot of inode `first + i` at index `i`.
    private var slots: [Value?] = []
    private let first: UInt64
    /// The values held (slots that are not empty).
    private(set) var count = 0

    init(first: UInt64) {
        self.first = first
    }

    private func index(_ inode: UInt64) -> Int? {
        guard inode >= first, inode - first < UInt64(slots.count) else { return nil }
        return Int(inode - first)
    }

    subscript(inode: UInt64) -> Value? {
        guard let index = index(inode) else { return nil }
        return slots[index]
    }

    /// Puts `value` at `inode`; returns what was there.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey inode: UInt64) -> Value? {
        precondition(inode >= first, "inode \(inode) is below the table's first number \(first)")
        let wanted = Int(inode - first)
        if wanted == slots.count {
            slots.append(nil)  // the usual case, inodes in order: a generic append of one cost 8% of adding a listing
        } else if wanted > slots.count {
            slots.append(contentsOf: repeatElement(nil, count: wanted + 1 - slots.count))
        }
        let previous = slots[wanted]
        slots[wanted] = value
        if previous == nil { count += 1 }
        return previous
    }

    /// Makes room for slots up to inode `last`, so that a million added in order grow the table once.
    mutating func reserve(through last: UInt64) {
        guard last >= first else { return }
        slots.reserveCapacity(Int(last - first) + 1)
    }

    /// Empties the slot of `inode`; returns what was there.
    @discardableResult
    mutating func removeValue(forKey inode: UInt64) -> Value? {
        guard let index = index(inode), let previous = slots[index] else { return nil }
        slots[index] = nil
        count -= 1
        return previous
    }

    /// The values held, in inode order.
    var values: [Value] { slots.compactMap { $0 } }

    /// Calls `body` with each inode held and its value, in inode order.
    func forEach(_ body: (UInt64, Value) -> Void) {
        for (index, slot) in slots.enumerated() {
            if let slot { body(first + UInt64(index), slot) }
        }
    }
}
