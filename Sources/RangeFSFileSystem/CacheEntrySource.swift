// An archive's bytes as the archive readers ask for them (ArchiveSource), read through the archive's cache entry:
// each range is served as a program's READ is (`RangeFS.serve`), so its blocks are fetched once at demand priority,
// kept crash-safe in the cache, counted in the file's progress, and read offline once cached. A read blocks the
// thread that asks until its blocks arrive: it runs only on the archive queue (RangeFS+Archives.swift), never on a
// FUSE thread or Swift's cooperative pool.

import Dispatch
import RangeFSArchives
import RangeFSCache
import RangeFSSystem

/// Reads an archive's cache entry by range, waiting for blocks not cached yet.
final class CacheEntrySource: ArchiveSource, Sendable {
    private unowned let fileSystem: RangeFS
    let entry: CacheEntry
    /// The archive's inode, for the read's bookkeeping.
    private let inode: UInt64
    /// Bytes asked for so far (an index's progress: a .tar.gz is read once from start to end).
    let bytesRead = LockedBox<Int64>(0)

    init(fileSystem: RangeFS, entry: CacheEntry, inode: UInt64) {
        self.fileSystem = fileSystem
        self.entry = entry
        self.inode = inode
    }

    var size: Int64 { Int64(entry.size) }

    func read(offset: Int64, count: Int) throws -> [UInt8] {
        guard offset >= 0, offset < size, count > 0 else { return [] }
        let end = min(UInt64(size), UInt64(offset) + UInt64(count))
        let range = UInt64(offset)..<end
        let done = DispatchSemaphore(value: 0)
        let outcome = LockedBox<Result<[UInt8], FileSystemError>>(.failure(.io("no answer")))
        fileSystem.serve(range, of: entry, inode: inode) { [entry] result in
            // Copied out while the reply's bytes are held (the caller keeps eviction out until this returns).
            let bytes = result.flatMap { reply in Self.bytes(of: reply, range: range, entry: entry) }
            outcome.withLock { $0 = bytes }
            done.signal()
        }
        done.wait()
        bytesRead.withLock { $0 += Int64(range.count) }
        return try outcome.withLock { $0 }.get()
    }

    /// The bytes a read's reply stands for. A mapping is never read in Swift (FileMapping.swift): the data file is
    /// read with pread instead; a block still in memory is copied from its buffer.
    private static func bytes(of reply: ReadReply, range: Range<UInt64>,
                              entry: CacheEntry) -> Result<[UInt8], FileSystemError> {
        do {
            switch reply {
            case .bytes(let bytes): return .success(bytes)
            case .mapped, .file: return .success(try entry.readPresent(range))
            case .segments(let segments):
                var bytes: [UInt8] = []
                bytes.reserveCapacity(range.count)
                var offset = range.lowerBound
                for segment in segments {
                    if let owner = segment.owner {
                        // SAFETY: the segment lies inside `owner`'s buffer, which the reply keeps alive meanwhile.
                        withExtendedLifetime(owner) {
                            bytes += UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: segment.address),
                                                            count: segment.count)
                        }
                    } else {
                        bytes += try entry.readPresent(offset..<offset + UInt64(segment.count))
                    }
                    offset += UInt64(segment.count)
                }
                return .success(bytes)
            }
        } catch {
            return .failure(.io("cannot read the cached archive: \(error)"))
        }
    }
}
