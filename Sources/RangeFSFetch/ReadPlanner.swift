// Plans one open handle's reads. For each kernel READ it observes the access once (the readahead window learns
// whether the reader is sequential), and says which bytes to fetch ahead from the network and which cached bytes
// to read ahead from the data file. Both go out in steps of half a window: one request per step of a sliding
// window would be one small HTTP request per kernel READ. Which of the planned blocks are missing, and which of
// those nobody fetches yet, is the BlockTable's answer (the entry's `request` and `claim`).
//
// It is a pure value. A READ answered late (a block held in memory was dropped before the reply) is served again
// without planning again, so one READ never moves the window twice.

/// Readahead planning for one open handle.
package struct ReadPlanner: Sendable {
    /// What one READ should do.
    package struct Plan: Sendable, Equatable {
        /// The bytes to answer, clipped to the file's end (empty past it).
        package var range: Range<UInt64>
        /// Bytes ahead of the reader to fetch from the network at readahead priority, if any.
        package var networkAhead: Range<UInt64>?
        /// Bytes ahead of the reader to read from the cache file into the page cache, if any.
        package var diskAhead: Range<UInt64>?
    }

    private var window: ReadaheadWindow
    /// How far readahead has been claimed from the network.
    private var networkAheadEnd: UInt64 = 0
    /// How far the cache file has been advised into the page cache.
    private var diskAheadEnd: UInt64 = 0

    package init(window: ReadaheadWindow) {
        self.window = window
    }

    /// The current readahead window in bytes (0 for a reader not seen to be sequential).
    package var readaheadWindow: UInt64 { window.window }

    /// How many bytes this handle has been asked for so far, in all its READs: what tells a use from a probe.
    /// (Not the length of one sequential stream: the kernel's READs reach the daemon's threads out of order, by
    /// more than the readahead window tolerates when the machine is busy, and each such jump restarts a stream.)
    package private(set) var bytesRead: UInt64 = 0

    /// Observes one READ of `count` bytes at `offset` in a file of `fileSize` bytes, and plans it.
    package mutating func plan(offset: UInt64, count: Int, fileSize: UInt64) -> Plan {
        bytesRead += UInt64(count)
        let ahead = window.observe(offset: offset, count: count)
        let readEnd = min(fileSize, offset + UInt64(count))
        let windowEnd = min(fileSize, readEnd + ahead)
        var plan = Plan(range: min(offset, readEnd)..<readEnd)
        if ahead == 0 {
            networkAheadEnd = 0
        } else if networkAheadEnd < readEnd + ahead / 2 && windowEnd > readEnd {
            plan.networkAhead = max(readEnd, networkAheadEnd)..<windowEnd
            networkAheadEnd = windowEnd
        }
        if ahead > 0 && windowEnd > diskAheadEnd + ahead / 2 {
            plan.diskAhead = max(offset, diskAheadEnd)..<windowEnd
            diskAheadEnd = windowEnd
        }
        return plan
    }
}
