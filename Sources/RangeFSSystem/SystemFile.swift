// Folder System/: typed wrappers over POSIX and the C shims (errno, EINTR, files, descriptors, CRC32C, clocks).
// It uses nothing else of the core; the C shims are called from here only.
//
// Typed wrappers over the POSIX calls the cache needs. Every call retries EINTR and turns failure into a
// `SystemError` that carries the errno and the path, so the caller never reads a stale global errno.
import CLinux
import Glibc

/// A failed system call: which call, on what, and the errno it set.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    let call: String
    let path: String
    package let errno: Errno

    public init(call: String, path: String, errno: Errno) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    /// The error of a call that just failed: the thread's errno now.
    package init(call: String, path: String) {
        self.init(call: call, path: path, errno: .current)
    }

    public var description: String { "\(call) \(path): \(errno)" }
    package var isNoSpace: Bool { errno == .noSpace || errno == .quotaExceeded }
}

/// Runs `body` until it does not fail with EINTR; a result of -1 becomes a `SystemError`.
@discardableResult
package func retryingEINTR<T: BinaryInteger>(_ call: String, _ path: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Errno.current
        if code != .interrupted { throw SystemError(call: call, path: path, errno: code) }
    }
}

/// The file operations the cache needs, on whatever holds the descriptor: a `SystemFile` owns one for its whole
/// life, a `PooledFile` borrows one from a `DescriptorPool` for the length of each call. Each method names the C
/// call it wraps.
public protocol FileOperations: Sendable {
    var path: String { get }
    /// Runs `body` with an open descriptor of the file, valid only while it runs.
    func withDescriptor<Result>(_ body: (Int32) throws(SystemError) -> Result) throws(SystemError) -> Result
}

/// An open file descriptor that closes itself when released.
public final class SystemFile: FileOperations, @unchecked Sendable {
    // @unchecked Sendable: the descriptor is immutable after init, and pread/pwrite/fdatasync on one
    // descriptor from several threads at once are safe (they take explicit offsets).

    /// The raw descriptor, for locks and fsync of metadata files.
    package let descriptor: Int32
    public let path: String

    /// Opens `path` with `open(2)`.
    public init(path: String, flags: Int32, mode: mode_t = 0o600) throws(SystemError) {
        self.path = path
        self.descriptor = try retryingEINTR("open", path) { open(path, flags | O_CLOEXEC, mode) }
    }

    deinit { close(descriptor) }

    public func withDescriptor<Result>(_ body: (Int32) throws(SystemError) -> Result) throws(SystemError) -> Result {
        try body(descriptor)
    }
}

extension FileOperations {
    /// Reads up to `count` bytes at `offset` with `pread(2)`, looping over short reads until end of file.
    package func read(at offset: UInt64, count: Int) throws(SystemError) -> [UInt8] {
        var failure: SystemError?
        // Uninitialised capacity: every byte returned was written by pread, so no zero-fill is needed.
        let buffer = [UInt8](unsafeUninitializedCapacity: count) { raw, initialized in
            do throws(SystemError) {
                // SAFETY: pread writes at most the buffer's `count` bytes, and only they are counted as initialized.
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
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemError) -> Int {
        try withDescriptor { descriptor throws(SystemError) in
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
    }

    /// Writes all of `bytes` at `offset`; a short write is retried, never ignored.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemError) {
        try write([bytes], at: offset)
    }

    /// Writes all of `pieces`, back to back, at `offset` with `pwritev(2)` (at most 1024 pieces); a short write
    /// goes on from where it stopped.
    package func write(_ pieces: [UnsafeRawBufferPointer], at offset: UInt64) throws(SystemError) {
        var vectors = pieces.filter { !$0.isEmpty }.map {
            // SAFETY: pwritev only reads through these vectors, which live as long as the pieces the caller holds.
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        try withDescriptor { descriptor throws(SystemError) in
            var position = off_t(offset)
            var first = 0
            while first < vectors.count {
                // SAFETY: the vector array outlives the call; short writes advance `first` within it.
                let wrote = try vectors[first...].withUnsafeBufferPointer { remaining throws(SystemError) in
                    try retryingEINTR("pwritev", path) {
                        pwritev(descriptor, remaining.baseAddress, Int32(remaining.count), position)
                    }
                }
                if wrote == 0 { throw SystemError(call: "pwritev", path: path, errno: .io) }
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
    }

    /// Writes all of `bytes` at `offset` with `pwrite(2)`.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(SystemError) {
        // SAFETY: the pointer is used only during the write, while `bytes` is alive.
        try bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try write(raw, at: offset) } }.get()
    }

    /// Flushes the file's data (not all its metadata) to stable storage with `fdatasync(2)`.
    package func synchronizeData() throws(SystemError) {
        _ = try withDescriptor { descriptor throws(SystemError) in
            try retryingEINTR("fdatasync", path) { fdatasync(descriptor) }
        }
    }

    /// Asks the kernel to start reading `range` into the page cache, with `posix_fadvise(WILLNEED)`; a hint, so
    /// failure is ignored. The kernel reads at most one readahead window (the disk's `read_ahead_kb`, or its
    /// largest request if bigger) per call and silently drops the rest, so a long range is asked for in steps.
    package func adviseWillNeed(_ range: Range<UInt64>) {
        let step: UInt64 = 2 << 20
        _ = try? withDescriptor { descriptor throws(SystemError) in
            for start in stride(from: range.lowerBound, to: range.upperBound, by: Int(step)) {
                let count = min(step, range.upperBound - start)
                _ = posix_fadvise(descriptor, off_t(start), off_t(count), POSIX_FADV_WILLNEED)
            }
        }
    }

    /// Starts writing `range` back to disk without waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that a
    /// later fdatasync has little left to do and does not stall other writers. A hint: failure is ignored.
    package func startWriteback(_ range: Range<UInt64>) {
        _ = try? withDescriptor { descriptor throws(SystemError) in
            rfs_start_writeback(descriptor, off_t(range.lowerBound), off_t(range.count))
        }
    }

    /// Frees the disk space of `range`, which then reads as zeros (`fallocate(PUNCH_HOLE|KEEP_SIZE)`).
    package func punchHole(_ range: Range<UInt64>) throws(SystemError) {
        _ = try withDescriptor { descriptor throws(SystemError) in
            try retryingEINTR("fallocate", path) {
                rfs_punch_hole(descriptor, off_t(range.lowerBound), off_t(range.count))
            }
        }
    }

    /// Sets the file's length with `ftruncate(2)`; growing it leaves a hole.
    package func truncate(to size: UInt64) throws(SystemError) {
        _ = try withDescriptor { descriptor throws(SystemError) in
            try retryingEINTR("ftruncate", path) { ftruncate(descriptor, off_t(size)) }
        }
    }

    /// The file's length and allocated 512-byte blocks, from `fstat(2)`.
    package func status() throws(SystemError) -> (size: UInt64, allocatedBlocks: UInt64) {
        var info = stat()
        _ = try withDescriptor { descriptor throws(SystemError) in
            try retryingEINTR("fstat", path) { fstat(descriptor, &info) }
        }
        return (UInt64(info.st_size), UInt64(info.st_blocks))
    }
}
