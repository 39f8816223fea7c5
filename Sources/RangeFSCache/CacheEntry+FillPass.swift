// Background fill under `--cache-max-size` (issue 45): a cap is a cap. A fill used to claim the next missing run
// of a file larger than the cap, evict what it had just fetched to store it, and start again from the first
// evicted block, for ever (the origin sent 4.4 GB in 13 s after one copy of a file through a 24 MiB cap).
//
// Two rules end that:
//   - A file that cannot fit (its size above the cap less the sizes of the other pinned files) is never filled:
//     it is read through, the cache being the window its readers read through.
//   - A fill pass never evicts a block used since the pass began: neither the blocks the fill brought nor those a
//     reader fetched or read meanwhile (of this file or any other). A pass begins when the file's fill is asked
//     for (the scheduler's new fill job) and ends when the file completes or the fill finds no room; the next
//     request for a fill (a new use of the file, `pin`, `resume`) begins a new one. So each pass evicts at most
//     what was cached before it began, once, and a reader that loops over a small file keeps its blocks: the fill
//     of another file stops instead (the file stays partial and status says why).
// Room is looked for when a run is claimed (`StoreLedger.hasRoomForFill`), for every block of the file in flight;
// a block that arrives when a reader, or the fill of another file, took the room meanwhile is stored under the cap
// as any other (least recently used first) and ends the pass, so the protection is broken by at most the
// transfers in flight, and never twice in one pass.
import RangeFSSystem

/// What one claim of fill work found (BlockStore requirement 8).
package enum FillClaim: Equatable {
    /// A run of absent blocks, now claimed, and the cursor for the next claim.
    case run(Range<Int>, next: Int)
    /// Every absent block is being fetched by someone already: nothing to claim now.
    case nothingFree
    /// The file is not to be completed under the cache cap (`CacheEntry.fillRefusal` says why): fill stops.
    case noRoom
}

/// Why background fill leaves a file partial under `--cache-max-size`.
package enum FillRefusal: Equatable, Sendable {
    /// The file is larger than the cap less the other pinned files (`pinned` bytes): it is read through.
    case largerThanCache(cap: Int, pinned: Int)
    /// The last fill pass found no room it had not itself used, or a reader, since it began.
    case outOfRoom(cap: Int)

    /// One line for status and the log.
    package var description: String {
        switch self {
        case .largerThanCache:
            "larger than " + room + ": read through, never completed; raise --cache-max-size to keep it whole"
        case .outOfRoom:
            "its background download stopped: " + room + " holds no room that was not used since it began; it "
                + "resumes on its next use, or raise --cache-max-size"
        }
    }

    /// The cap, and what pinned files hold of it: `--cache-max-size (24.0 MiB, less 8.0 MiB of pinned files)`.
    package var room: String {
        switch self {
        case .largerThanCache(let cap, let pinned):
            "--cache-max-size (\(CacheCloseReport.bytes(UInt64(cap)))"
                + (pinned > 0 ? ", less \(CacheCloseReport.bytes(UInt64(pinned))) of pinned files)" : ")")
        case .outOfRoom(let cap):
            "--cache-max-size (\(CacheCloseReport.bytes(UInt64(cap))))"
        }
    }
}

extension CacheEntry {
    /// Claims the next run of fill work (requirement 8 of BlockStore): the first run of absent, unclaimed blocks at
    /// or after `cursor` (wrapping around once), at most `limit` long, if the cache can hold it without evicting
    /// anything used during this pass. `newPass` begins a pass (the file's fill was just asked for).
    package func claimFillRun(from cursor: Int, limit: Int, newPass: Bool) -> FillClaim {
        if newPass {
            // Blocks used from this moment on are spared by this pass's evictions.
            let start = ledger.clock
            state.withLock { state in state.eviction.fillPass = FillPass(start: start) }
        }
        if let refusal = ledger.refusalToFill(self) {
            endFillPass(refusal)
            return .noRoom
        }
        let (claimed, inFlight, pass) = state.withLock { state -> ((Range<Int>, Int)?, Int, FillPass?) in
            guard !state.stale, state.eviction.fillPass?.refusal == nil else { return (nil, 0, state.eviction.fillPass) }
            let claimed = state.blocks.claimNextRun(from: cursor, limit: limit)
            // Blocks received stay in flight until written, but the cap counts them from their arrival.
            let coming = max(0, state.blocks.inFlight.setCount - state.blocks.inMemory.setCount)
            return (claimed, coming, state.eviction.fillPass)
        }
        if pass?.refusal != nil { return .noRoom }
        guard let (run, next) = claimed else { return .nothingFree }
        // Room for every block of the file still to arrive, the run included: the fill's other segments and
        // readahead are counted only once they arrive, and several segments claimed against the same free room would take
        // what the pass spares when they land. Checked outside the entry's lock: the ledger's check looks at
        // blocks of every entry, this one's included.
        let needed = max(Int(byteRange(of: run).count), inFlight * blockSize)
        if let pass, !ledger.hasRoomForFill(needed, sparing: pass.start) {
            returnClaims(run)
            endFillPass(.outOfRoom(cap: ledger.maxBytes ?? 0))
            return .noRoom
        }
        return .run(run, next: next)
    }

    /// Why background fill leaves this file partial, if it does: larger than the cap now, or the last pass ran
    /// out of room. Nil for a file that fill may complete.
    package var fillRefusal: FillRefusal? {
        if let refusal = ledger.refusalToFill(self) { return refusal }
        return state.withLock { state in state.blocks.present.isFull ? nil : state.eviction.fillPass?.refusal }
    }

    /// Where this entry's current fill pass began, if a fill claimed work of it: a block the fill brings is stored
    /// sparing what was used since.
    var fillPassStart: UInt64? {
        state.withLock { state in state.eviction.fillPass.flatMap { $0.refusal == nil ? $0.start : nil } }
    }

    /// The fill pass ends short of completing the file (`refusal`): the scheduler drops its job at its next claim.
    func endFillPass(_ refusal: FillRefusal) {
        let first = state.withLock { state -> Bool in
            guard state.eviction.fillPass != nil, state.eviction.fillPass?.refusal == nil else { return false }
            state.eviction.fillPass?.refusal = refusal
            return true
        }
        if first { logger.notice("\(Redaction.redact(header.url)) is left partial: \(refusal.description)") }
    }
}

/// One background fill pass of an entry: when it began (the ledger's clock) and, once it ended short, why.
struct FillPass {
    var start: UInt64
    var refusal: FillRefusal?
}
