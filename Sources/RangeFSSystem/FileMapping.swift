import Glibc

/// A read-only shared mapping of a whole file, for replies that the kernel copies straight out of the page cache.
///
/// Only the kernel may read it: user code that touches a page the disk cannot deliver gets SIGBUS, whereas a
/// system call that copies from it (writev to /dev/fuse) fails with EFAULT, and the kernel then ends the FUSE
/// request with EIO. So its address is handed to the FUSE reply and never dereferenced in Swift.
public final class FileMapping: @unchecked Sendable {
    // @unchecked Sendable: the address and length never change, and the mapping is read-only.
    package let address: UInt
    let count: Int

    /// Maps `count` bytes of `file`; nil if the file is empty or cannot be mapped (then replies splice instead).
    package init?(file: some FileOperations, count: Int) {
        guard count > 0 else { return nil }
        // The mapping keeps the file open; the descriptor goes back to its pool.
        let pointer = try? file.withDescriptor { descriptor throws(SystemError) in
            mmap(nil, count, PROT_READ, MAP_SHARED, descriptor, 0)
        }
        guard let pointer, pointer != MAP_FAILED else { return nil }
        address = UInt(bitPattern: pointer)
        self.count = count
    }

    // SAFETY: the mapping made in init, unmapped once, when nothing can use it any more.
    deinit { munmap(UnsafeMutableRawPointer(bitPattern: address), count) }

    /// Runs `body` on the mapped bytes of `range` while they are locked in memory (`mlock`), then unlocks them
    /// and drops their page-table entries. Locking reads every page first and reports a page the disk cannot
    /// deliver as an error, and a locked page cannot be reclaimed and re-read, so `body` never meets a SIGBUS.
    /// Nil if the pages could not be locked (an I/O error, or RLIMIT_MEMLOCK): read them with pread instead.
    package func withLockedBytes<Result>(_ range: Range<UInt64>,
                                        _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        guard range.upperBound <= UInt64(count), !range.isEmpty else { return nil }
        let (start, length) = Self.pages(address: address + UInt(range.lowerBound), count: range.count)
        // SAFETY: page-aligned addresses inside the mapping (`range` is checked against its length above).
        let pages = UnsafeRawPointer(bitPattern: start)
        guard mlock(pages, length) == 0 else { return nil }
        // SAFETY: inside the mapping, and its pages are locked in memory (mlock) while `body` runs.
        let result = body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address + UInt(range.lowerBound)),
                                                 count: range.count))
        munlock(pages, length)
        Self.release(address: address + UInt(range.lowerBound), count: range.count)
        return result
    }

    /// Whether every page of `range` is in the page cache (`mincore`); false if it cannot tell.
    package func isResident(_ range: Range<UInt64>) -> Bool {
        guard range.upperBound <= UInt64(count), !range.isEmpty else { return false }
        let (start, length) = Self.pages(address: address + UInt(range.lowerBound), count: range.count)
        let pageCount = length / Int(sysconf(Int32(_SC_PAGESIZE)))
        var flags = [UInt8](repeating: 0, count: pageCount)
        // SAFETY: mincore only reports on the pages of the mapping; `flags` has one byte per page.
        guard mincore(UnsafeMutableRawPointer(bitPattern: start), length, &flags) == 0 else { return false }
        return flags.allSatisfy { $0 & 1 != 0 }
    }

    /// The page-aligned start and length that cover `count` bytes at `address`.
    private static func pages(address: UInt, count: Int) -> (UInt, Int) {
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let start = address & ~(page - 1)
        let end = (address + UInt(count) + page - 1) & ~(page - 1)
        return (start, Int(end - start))
    }

    /// Drops this process's page-table entries for `count` bytes at `address` after a reply (the page cache keeps
    /// the pages): mapped pages would count as the daemon's memory (RSS) and could not be dropped with the rest
    /// of the page cache.
    public static func release(address: UInt, count: Int) {
        let (start, length) = pages(address: address, count: count)
        // SAFETY: advice on the mapping's own pages; a read-only shared mapping loses no data.
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), length, MADV_DONTNEED)
    }
}
