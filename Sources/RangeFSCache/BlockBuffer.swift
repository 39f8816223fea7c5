// Memory for fetched blocks on their way to the cache file.
//
// A block is received into a page-aligned buffer, which the cache entry then owns: readers are answered from it
// at once, and the store's writer thread writes it to the data file in the background (background fill with
// O_DIRECT, which needs the alignment; see CacheEntry+Writing). `WriteBudget` bounds the bytes waiting to be
// written, per store: when the disk falls behind, receiving waits for it.

import Dispatch
import Glibc
import RangeFSSystem

/// One block's bytes in page-aligned memory (O_DIRECT needs aligned buffers), freed with its last reference.
public final class BlockBuffer: @unchecked Sendable, Equatable {
    // @unchecked Sendable: the bytes are written only by the one owner that fills the buffer (a fetch's sink),
    // before it hands the buffer over; afterwards they are only read.
    // SAFETY: owned by this buffer from init to deinit (aligned, `rounded(capacity)` bytes); never freed twice.
    let address: UnsafeMutableRawPointer
    package let capacity: Int
    /// How many bytes are filled, from the start.
    package private(set) var count = 0
    /// Where the memory goes back to; nil frees it.
    private let pool: BufferPool?

    static let alignment = 4096

    /// An empty buffer for `capacity` bytes, from `pool` if given.
    package init(capacity: Int, pool: BufferPool? = nil) {
        address = pool?.take(Self.rounded(capacity)) ?? BufferPool.allocate(Self.rounded(capacity))
        self.capacity = capacity
        self.pool = pool
    }

    private static func rounded(_ capacity: Int) -> Int {
        max(alignment, (capacity + alignment - 1) / alignment * alignment)
    }

    /// A filled copy of `bytes`.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        append(bytes)
    }

    deinit {
        if let pool { pool.giveBack(address, size: Self.rounded(capacity)) } else { free(address) }
    }

    /// Appends as much of `bytes` as fits and returns how many bytes that was.
    @discardableResult
    package func append(_ bytes: UnsafeRawBufferPointer) -> Int {
        let take = min(capacity - count, bytes.count)
        // SAFETY: `take` never exceeds the room left (capacity - count) nor the source's count.
        if take > 0, let base = bytes.baseAddress { (address + count).copyMemory(from: base, byteCount: take) }
        count += take
        return take
    }

    package func reset() { count = 0 }
    /// Drops all but the first `bytes` bytes.
    package func keep(first bytes: Int) { count = min(count, max(0, bytes)) }

    package var isFull: Bool { count == capacity }

    // SAFETY: valid while the buffer lives; callers hold the buffer (a reply segment keeps it as its owner).
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: address, count: count) }

    public static func == (lhs: BlockBuffer, rhs: BlockBuffer) -> Bool { lhs === rhs }
}

/// Recycles block memory. Blocks are allocated on the fetcher's thread and freed on others (the writer, the reply
/// queue); left to malloc, that spread them over per-thread arenas, and the daemon's memory grew with the
/// fragments (a peak RSS of 120 MiB with 8 copies, against 43 without buffers). Free memory kept here is bounded.
package final class BufferPool: Sendable {
    /// Free memory kept for reuse, by size (addresses as integers, which are Sendable).
    private let free = LockedBox<(bySize: [Int: [UInt]], bytes: Int)>(([:], 0))
    private let keptBytes: Int

    init(keptBytes: Int) {
        self.keptBytes = keptBytes
    }

    static func allocate(_ size: Int) -> UnsafeMutableRawPointer {
        // SAFETY: posix_memalign gives `size` aligned bytes or fails, which traps below.
        var pointer: UnsafeMutableRawPointer?
        guard posix_memalign(&pointer, BlockBuffer.alignment, size) == 0, let pointer else {
            fatalError("cannot allocate \(size) bytes for a block")
        }
        return pointer
    }

    func take(_ size: Int) -> UnsafeMutableRawPointer {
        let recycled = free.withLock { pool -> UInt? in
            guard let address = pool.bySize[size]?.popLast() else { return nil }
            pool.bytes -= size
            return address
        }
        // SAFETY: a recycled address was allocated with this size and given back by its last owner.
        if let recycled, let pointer = UnsafeMutableRawPointer(bitPattern: recycled) { return pointer }
        return Self.allocate(size)
    }

    func giveBack(_ pointer: UnsafeMutableRawPointer, size: Int) {
        let address = UInt(bitPattern: pointer)
        let kept = free.withLock { pool -> Bool in
            guard pool.bytes + size <= keptBytes else { return false }
            pool.bySize[size, default: []].append(address)
            pool.bytes += size
            return true
        }
        if !kept { Glibc.free(pointer) }
    }
}

/// Bounds the bytes of received blocks that wait to be written. Taking room waits while the bound is reached; the
/// writer gives room back after each write, and never waits for a receiver, so this cannot deadlock.
final class WriteBudget: Sendable {
    private static let unit = 64 << 10
    private let units: Int
    private let room: DispatchSemaphore

    init(bytes: Int) {
        units = max(1, bytes / Self.unit)
        room = DispatchSemaphore(value: units)
    }

    private func units(_ bytes: Int) -> Int { min(units, max(1, (bytes + Self.unit - 1) / Self.unit)) }

    func take(_ bytes: Int) {
        for _ in 0..<units(bytes) { room.wait() }
    }

    func giveBack(_ bytes: Int) {
        for _ in 0..<units(bytes) { room.signal() }
    }
}
