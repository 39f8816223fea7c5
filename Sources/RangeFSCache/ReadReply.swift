// How the cache answers a read of present bytes (CacheEntry+Reply.swift): the value the FUSE adapter turns
// into its reply, with no copy where it can.
import RangeFSSystem

/// Where the bytes of a read of present blocks are: what the cache hands back, and the adapter replies from.
public enum ReadReply: Sendable, Equatable {
    /// `count` bytes at `address`, inside the cache file's read-only mapping, all present: the kernel copies them
    /// into its reply (one copy, no buffer). The address is valid only while the reply callback runs, and only the
    /// kernel may read it (see `FileMapping`).
    case mapped(address: UInt, count: Int)
    /// `count` bytes at `offset` of the file whose descriptor `lease` holds open until the reply is sent, all
    /// present: reply straight from it (spliced where libfuse can); used when the file could not be mapped.
    case file(FileLease, offset: UInt64, count: Int)
    /// Pieces that follow each other in the file: some in the mapping (as in `mapped`), some in the buffers of
    /// blocks still in memory (just received, or unwritable because the cache disk is full).
    case segments([ReplySegment])
    /// The bytes themselves (when the file is not mapped and some came from memory).
    case bytes([UInt8])
}

/// One piece of a `.segments` reply: `count` bytes at `address`, inside `owner` (which keeps them alive until the
/// reply is sent) or, without an owner, inside the cache file's mapping.
public struct ReplySegment: Sendable, Equatable {
    public var address: UInt
    public var count: Int
    public var owner: BlockBuffer?
}
