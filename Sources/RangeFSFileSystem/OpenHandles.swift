// The files open through the kernel: what each handle reads (a cache entry with its read planner; for a file
// without a known length, the entry its stream is in), and whether its reads asked for the file to be completed yet. RangeFS asks
// it once per read, under one lock, for the read's plan.
//
// Lock: `state` is RangeFS's handle lock in the core's lock order (CacheStore.swift): nothing is taken under it
// but the planner's own arithmetic.

import RangeFSCache
import RangeFSFetch
import RangeFSSystem

/// The open handles of a mounted file system.
final class OpenHandles: Sendable {
    /// A handle on a cached file.
    struct OpenFile {
        let inode: UInt64
        let entry: CacheEntry
        var planner: ReadPlanner
        /// Whether this handle's reads already asked for the file to be completed (`PrefetchPolicy.use`).
        var askedForFill = false
        /// Whether the kernel reads this handle's file itself (FUSE passthrough): no READ should come.
        var passthrough = false
    }

    /// What a read of a handle is to do.
    enum Read {
        /// Serve `plan` from `file`'s entry; `startFill`: this read made the handle a use of the file.
        case blocks(OpenFile, ReadPlanner.Plan, startFill: Bool)
    }

    private struct State {
        var next: UInt64 = 1
        var files: [UInt64: OpenFile] = [:]
        /// READs the daemon answered, per inode, since the mount: a passthrough handle adds none.
        var reads: [UInt64: Int] = [:]
    }

    private let state = LockedBox(State())

    /// A new handle reading `entry` (the file `inode`), with a readahead window of at most `readaheadMaximum`; in
    /// passthrough mode if `decide` agrees, given how many handles of `inode` are open in each mode; decided under the handle lock, so two opens cannot pick different modes for one inode
    /// (the kernel refuses an inode open both ways, ETXTBSY).
    func open(inode: UInt64, entry: CacheEntry, readaheadMaximum: UInt64,
              decide: (_ normal: Int, _ passthrough: Int) -> Bool) -> (handle: UInt64, passthrough: Bool) {
        state.withLock { state in
            let open = state.files.values.filter { $0.inode == inode }
            let passthrough = decide(open.count { !$0.passthrough }, open.count { $0.passthrough })
            let handle = state.next
            state.next += 1
            let window = ReadaheadWindow(maximum: readaheadMaximum)
            state.files[handle] = OpenFile(inode: inode, entry: entry, planner: ReadPlanner(window: window),
                                           passthrough: passthrough)
            return (handle, passthrough)
        }
    }

    /// Makes `handle` a normal one: its passthrough could not be set up. Returns its entry if it was passthrough.
    func clearPassthrough(_ handle: UInt64) -> CacheEntry? {
        state.withLock { state in
            guard let file = state.files[handle], file.passthrough else { return nil }
            state.files[handle]!.passthrough = false
            return file.entry
        }
    }

    /// How many handles of `inode` are open in passthrough mode, and how many READs the daemon answered for it.
    func usage(of inode: UInt64) -> (passthrough: Int, reads: Int) {
        state.withLock { state in
            (state.files.values.count { $0.inode == inode && $0.passthrough }, state.reads[inode] ?? 0)
        }
    }

    /// Forgets `handle`; returns what it read.
    func close(_ handle: UInt64) -> OpenFile? {
        state.withLock { $0.files.removeValue(forKey: handle) }
    }

    /// Makes every handle reading `old` read `new` (an entry of unknown size reshaped); returns how many.
    func replaceEntry(_ old: CacheEntry, with new: CacheEntry) -> Int {
        state.withLock { state in
            var moved = 0
            for (handle, file) in state.files where file.entry === old {
                state.files[handle] = OpenFile(inode: file.inode, entry: new, planner: file.planner,
                                               askedForFill: file.askedForFill, passthrough: file.passthrough)
                moved += 1
            }
            return moved
        }
    }

    /// Plans a read of `count` bytes at `offset` through `handle`; nil if it is not open. With `fillAfter`, the
    /// read that brings the handle's reads to that many bytes asks for its file to be completed.
    func plan(_ handle: UInt64, offset: UInt64, count: Int, fillAfter: UInt64?) -> Read? {
        state.withLock { state -> Read? in
            if let file = state.files[handle] {
                state.reads[file.inode, default: 0] += 1
                // In place: a copy of the planner would be copied again on write.
                let plan = state.files[handle]!.planner.plan(offset: offset, count: count, fileSize: file.entry.size)
                // A use, not a probe: this handle has read more than a prober reads.
                var startFill = false
                if let fillAfter, !file.askedForFill, state.files[handle]!.planner.bytesRead >= fillAfter {
                    state.files[handle]!.askedForFill = true
                    startFill = true
                }
                return .blocks(file, plan, startFill: startFill)
            }
            return nil
        }
    }

    /// The readahead window of `handle` in bytes (0 for a reader not seen to be sequential); nil if not open.
    func readaheadWindow(of handle: UInt64) -> UInt64? {
        state.withLock { $0.files[handle]?.planner.readaheadWindow }
    }

    /// Whether any handle is open on `inode`.
    func isOpen(_ inode: UInt64) -> Bool {
        state.withLock { state in
            state.files.values.contains { $0.inode == inode }
        }
    }

    /// The entry a handle open on `inode` reads, if any: a file that left its listing but is still open.
    func entry(openOn inode: UInt64) -> CacheEntry? {
        state.withLock { $0.files.values.first { $0.inode == inode }?.entry }
    }
}
