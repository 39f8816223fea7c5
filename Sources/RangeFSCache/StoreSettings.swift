// Every setting of the cache, with its default stated once. The command line's options take their defaults from
// here (see the tuning table in docs/usage.md), and tests build stores with the same values.

import Dispatch

/// How a cache store commits, caps and buffers what it is given.
public struct StoreSettings: Sendable, Equatable {
    /// How often dirty entries are committed; a crash loses at most about this much progress.
    public var commitInterval: Duration = .milliseconds(500)
    /// The store also commits once its entries stored this many bytes since the last commit, so that a crash on a
    /// fast link loses at most about this much too.
    public var commitBytes = 8 << 20
    /// The cap on cached bytes of the mounted files (`--cache-max-size`), or nil for none.
    public var maxBytes: Int?
    /// Bytes of blocks kept in memory per entry when they cannot be written (a full disk); oldest dropped first.
    var memoryBlockLimit = 64 << 20
    /// Received bytes of readahead and fill that may wait for the writer; receiving waits beyond this. With the
    /// demand budget and the commit backlog (twice `commitBytes`) it makes the crash bound: 8 + 8 + 16 = 32 MiB.
    var writeBudgetBytes = 8 << 20
    /// The same for the blocks readers wait for, which never wait behind readahead and fill.
    var demandBudgetBytes = 8 << 20
    /// Free block memory kept for reuse.
    var keptBufferBytes = 16 << 20
    /// An entry nobody has used for this long is released from memory once it is quiet (it opens again from its
    /// files on the next use), so that memory follows the files in use, not the files mounted.
    var idleEntryTime: Duration = .seconds(30)
    /// At most this many entries nobody holds stay open, however recently used: beyond it the least recently used
    /// are released once quiet, so that the mappings and memory of entries read once follow this count, not how
    /// fast files are read within `idleEntryTime` (issue 46: 100,000 files read once kept ~20,000 open).
    var idleEntryLimit = 4096
    /// Descriptors the cache's files may hold open at once; nil takes the process's limit on open files (raised to
    /// its hard limit) less a reserve for sockets and FUSE (`DescriptorPool.capacityForThisProcess`).
    var openFiles: Int?

    public init() {}
}

/// The queues and memory bounds that carry fetched blocks from the network to the disk: one per store, shared by
/// its entries, so two stores in one process never share them.
package final class BlockPipeline: Sendable {
    /// Where received blocks are written, for every entry of the store: one thread, so the disk sees few, large
    /// writes.
    let writerQueue = DispatchQueue(label: "rangefs.cache-writer")
    /// Where blocks from an earlier run are checked ahead of a sequential reader: one thread, off the READ path.
    let verifyQueue = DispatchQueue(label: "rangefs.verify")
    /// Where an open answered by a probe's completion checks its complete file (CacheEntry+OnePassCheck.swift):
    /// never on the network's thread, and never behind the background check of a large file.
    package let openCheckQueue = DispatchQueue(label: "rangefs.open-check")
    /// Where cached bytes ahead of a sequential reader are read into the page cache, off the READ path.
    let diskAheadQueue = DispatchQueue(label: "rangefs.disk-ahead")
    /// Where woken readers are answered, off the fetcher's thread.
    let replyQueue = DispatchQueue(label: "rangefs.replies", attributes: .concurrent)
    let writeBudget: WriteBudget
    let demandBudget: WriteBudget
    let buffers: BufferPool
    /// Bytes of unwritable blocks an entry keeps in memory.
    let memoryBlockLimit: Int

    init(settings: StoreSettings) {
        writeBudget = WriteBudget(bytes: settings.writeBudgetBytes)
        demandBudget = WriteBudget(bytes: settings.demandBudgetBytes)
        buffers = BufferPool(keptBytes: settings.keptBufferBytes)
        memoryBlockLimit = settings.memoryBlockLimit
    }

    /// Returns once every block accepted so far is written (or failed to be).
    func waitForWrites() { writerQueue.sync {} }
}
