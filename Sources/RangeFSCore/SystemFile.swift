// Typed wrappers over the POSIX calls the cache needs. Every call retries EINTR and turns failure into a
// `SystemError` that carries the errno and the path, so the caller never reads a stale global errno.
import CChecksum
import Glibc

/// A failed system call: which call, on what, and the errno it set.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let path: String
    public let errno: Int32

    public init(call: String, path: String, errno: Int32) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(call) \(path): \(String(cString: strerror(errno)))" }
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}

/// Runs `body` until it does not fail with EINTR; a result of -1 becomes a `SystemError`.
@discardableResult
func retryingEINTR<T: BinaryInteger>(_ call: String, _ path: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code != EINTR { throw SystemError(call: call, path: path, errno: code) }
    }
}

/// An open file descriptor that closes itself when released.
public final class SystemFile: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is immutable after init, and pread/pwrite/fdatasync on one
    // descriptor from several threads at once are safe (they take explicit offsets).

    /// The raw descriptor, for replies that splice straight from the file.
    public let descriptor: Int32
    public let path: String

    /// Opens `path` with `open(2)`.
    public init(path: String, flags: Int32, mode: mode_t = 0o600) throws(SystemError) {
        self.path = path
        self.descriptor = try retryingEINTR("open", path) { open(path, flags | O_CLOEXEC, mode) }
    }

    deinit { close(descriptor) }

    /// Reads up to `count` bytes at `offset` with `pread(2)`, looping over short reads until end of file.
    public func read(at offset: UInt64, count: Int) throws(SystemError) -> [UInt8] {
        var failure: SystemError?
        // Uninitialised capacity: every byte returned was written by pread, so no zero-fill is needed.
        let buffer = [UInt8](unsafeUninitializedCapacity: count) { raw, initialized in
            do throws(SystemError) {
                initialized = try read(into: UnsafeMutableRawBufferPointer(raw), at: offset)
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return buffer
    }

    /// Fills `buffer` from `offset` with `pread(2)`; returns how many bytes were read (less only at end of file).
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let got = try retryingEINTR("pread", path) {
                pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if got == 0 { break }
            done += got
        }
        return done
    }

    /// Writes all of `bytes` at `offset`; a short write is retried, never ignored.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemError) {
        try write([bytes], at: offset)
    }

    /// Writes all of `pieces`, back to back, at `offset` with `pwritev(2)` (at most 1024 pieces); a short write
    /// goes on from where it stopped.
    public func write(_ pieces: [UnsafeRawBufferPointer], at offset: UInt64) throws(SystemError) {
        var vectors = pieces.filter { !$0.isEmpty }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        var position = off_t(offset)
        var first = 0
        while first < vectors.count {
            let wrote = try vectors[first...].withUnsafeBufferPointer { remaining throws(SystemError) in
                try retryingEINTR("pwritev", path) { pwritev(descriptor, remaining.baseAddress, Int32(remaining.count), position) }
            }
            if wrote == 0 { throw SystemError(call: "pwritev", path: path, errno: EIO) }
            position += off_t(wrote)
            var left = wrote
            while left > 0 && left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base += left
                vectors[first].iov_len -= left
            }
        }
    }

    /// Writes all of `bytes` at `offset` with `pwrite(2)`.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(SystemError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try write(raw, at: offset) } }.get()
    }

    /// Flushes the file's data (not all its metadata) to stable storage with `fdatasync(2)`.
    public func synchronizeData() throws(SystemError) {
        try retryingEINTR("fdatasync", path) { fdatasync(descriptor) }
    }

    /// Asks the kernel to start reading `range` into the page cache, with `posix_fadvise(WILLNEED)`; a hint, so
    /// failure is ignored.
    public func adviseWillNeed(_ range: Range<UInt64>) {
        _ = posix_fadvise(descriptor, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_WILLNEED)
    }

    /// Starts writing `range` back to disk without waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that a
    /// later fdatasync has little left to do and does not stall other writers. A hint: failure is ignored.
    public func startWriteback(_ range: Range<UInt64>) {
        _ = rfs_start_writeback(descriptor, off_t(range.lowerBound), off_t(range.count))
    }

    /// Frees the disk space of `range`, which then reads as zeros (`fallocate(PUNCH_HOLE|KEEP_SIZE)`).
    public func punchHole(_ range: Range<UInt64>) throws(SystemError) {
        try retryingEINTR("fallocate", path) { rfs_punch_hole(descriptor, off_t(range.lowerBound), off_t(range.count)) }
    }

    /// Sets the file's length with `ftruncate(2)`; growing it leaves a hole.
    public func truncate(to size: UInt64) throws(SystemError) {
        try retryingEINTR("ftruncate", path) { ftruncate(descriptor, off_t(size)) }
    }

    /// The file's length and allocated 512-byte blocks, from `fstat(2)`.
    public func status() throws(SystemError) -> (size: UInt64, allocatedBlocks: UInt64) {
        var info = stat()
        try retryingEINTR("fstat", path) { fstat(descriptor, &info) }
        return (UInt64(info.st_size), UInt64(info.st_blocks))
    }
}

/// A read-only shared mapping of a whole file, for replies that the kernel copies straight out of the page cache.
///
/// Only the kernel may read it: user code that touches a page the disk cannot deliver gets SIGBUS, whereas a
/// system call that copies from it (writev to /dev/fuse) fails with EFAULT, and the kernel then ends the FUSE
/// request with EIO. So its address is handed to the FUSE reply and never dereferenced in Swift.
public final class FileMapping: @unchecked Sendable {
    // @unchecked Sendable: the address and length never change, and the mapping is read-only.
    public let address: UInt
    public let count: Int

    /// Maps `count` bytes of `file`; nil if the file is empty or cannot be mapped (then replies splice instead).
    public init?(file: SystemFile, count: Int) {
        guard count > 0 else { return nil }
        let pointer = mmap(nil, count, PROT_READ, MAP_SHARED, file.descriptor, 0)
        guard let pointer, pointer != MAP_FAILED else { return nil }
        address = UInt(bitPattern: pointer)
        self.count = count
    }

    deinit { munmap(UnsafeMutableRawPointer(bitPattern: address), count) }

    /// Runs `body` on the mapped bytes of `range` while they are locked in memory (`mlock`), then unlocks them
    /// and drops their page-table entries. Locking reads every page first and reports a page the disk cannot
    /// deliver as an error, and a locked page cannot be reclaimed and re-read, so `body` never meets a SIGBUS.
    /// Nil if the pages could not be locked (an I/O error, or RLIMIT_MEMLOCK): read them with pread instead.
    public func withLockedBytes<Result>(_ range: Range<UInt64>,
                                        _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        guard range.upperBound <= UInt64(count), !range.isEmpty else { return nil }
        let (start, length) = Self.pages(address: address + UInt(range.lowerBound), count: range.count)
        let pages = UnsafeRawPointer(bitPattern: start)
        guard mlock(pages, length) == 0 else { return nil }
        let result = body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address + UInt(range.lowerBound)),
                                                 count: range.count))
        munlock(pages, length)
        Self.release(address: address + UInt(range.lowerBound), count: range.count)
        return result
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
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), length, MADV_DONTNEED)
    }
}

/// Small-file and folder helpers for the cache's metadata files.
public enum FileSystemCalls {
    /// Replaces `path` with `bytes` atomically: write a temp file, fsync it, rename it over, fsync the folder.
    /// A reader (or a crash) sees the old contents or the new, never a mix.
    public static func replaceAtomically(_ path: String, with bytes: [UInt8]) throws(SystemError) {
        let temporary = path + ".tmp"
        do {
            let file = try SystemFile(path: temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
            try file.write(bytes, at: 0)
            try retryingEINTR("fsync", temporary) { fsync(file.descriptor) }
        }
        try retryingEINTR("rename", path) { rename(temporary, path) }
        try synchronizeDirectory(containing: path)
    }

    /// fsyncs the folder that holds `path`, so a rename or create in it is durable.
    public static func synchronizeDirectory(containing path: String) throws(SystemError) {
        let folder = parentDirectory(of: path)
        let directory = try SystemFile(path: folder, flags: O_RDONLY | O_DIRECTORY)
        try retryingEINTR("fsync", folder) { fsync(directory.descriptor) }
    }

    /// The whole contents of a small file, or nil if it does not exist.
    public static func readSmallFile(_ path: String, limit: Int = 64 << 20) throws(SystemError) -> [UInt8]? {
        let file: SystemFile
        do {
            file = try SystemFile(path: path, flags: O_RDONLY)
        } catch where error.errno == ENOENT {
            return nil
        }
        let size = try file.status().size
        guard size <= UInt64(limit) else { throw SystemError(call: "read", path: path, errno: EFBIG) }
        return try file.read(at: 0, count: Int(size))
    }

    /// Creates `path` and its missing parents with `mode`; an existing folder is fine.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, mode) != 0 && Glibc.errno != EEXIST {
                throw SystemError(call: "mkdir", path: current, errno: Glibc.errno)
            }
        }
    }

    /// Removes `path` if it exists.
    public static func removeFile(_ path: String) throws(SystemError) {
        if unlink(path) != 0 && Glibc.errno != ENOENT {
            throw SystemError(call: "unlink", path: path, errno: Glibc.errno)
        }
    }

    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
