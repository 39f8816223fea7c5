import CFUSE
import Glibc
import RangeFSCache
import RangeFSFileSystem
import RangeFSSystem

/// A kernel request that is answered later, possibly from another thread.
struct FUSERequest: @unchecked Sendable {
    // @unchecked Sendable: libfuse allows a request to be answered from any thread, exactly once; each reply
    // method below is called once per request by construction of the handlers.
    let raw: fuse_req_t

    /// Answers with `error`'s errno; the core logs and counts an `io` error first, as its message goes no further.
    func fail(_ error: FileSystemError) {
        if case .io = error { context(raw).fileSystem.noteFailure(error) }
        fuse_reply_err(raw, error.errno)
    }

    func replyEntry(_ attributes: FileAttributes, context: FUSEContext) {
        var entry = Self.entryParameter(attributes, context: context)
        fuse_reply_entry(raw, &entry)
    }

    /// A name's attributes as LOOKUP and READDIRPLUS hand them over: kept by the kernel for the mount's timeouts,
    /// or longer where the file system says they cannot change (`kernelCacheSeconds`).
    static func entryParameter(_ attributes: FileAttributes, context: FUSEContext) -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.ino = fuse_ino_t(attributes.inode)
        entry.generation = 1
        entry.attr = attributes.stat(owner: context.owner)
        entry.attr_timeout = max(context.attributeTimeout, attributes.kernelCacheSeconds)
        entry.entry_timeout = max(context.entryTimeout, attributes.kernelCacheSeconds)
        return entry
    }

    func replyAttributes(_ attributes: FileAttributes, owner: Owner, timeout: Double) {
        var info = attributes.stat(owner: owner)
        fuse_reply_attr(raw, &info, timeout)
    }

    func replyBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in _ = fuse_reply_buf(self.raw, raw.baseAddress, raw.count) }
    }

    /// Sends `count` bytes from a cache file's mapping: writev copies them from the page cache into the kernel's
    /// reply. If the disk cannot deliver a page, writev fails with EFAULT and the kernel answers the READ with EIO.
    func replyMapped(address: UInt, count: Int) {
        fuse_reply_buf(raw, UnsafeRawPointer(bitPattern: address)?.assumingMemoryBound(to: CChar.self), count)
        FileMapping.release(address: address, count: count)
    }

    /// Sends pieces from a cache file's mapping and from block buffers with one writev (see `replyMapped`); the
    /// segments keep their buffers alive until it returns.
    func replySegments(_ segments: [ReplySegment]) {
        var vectors = segments.map {
            iovec(iov_base: UnsafeMutableRawPointer(bitPattern: $0.address), iov_len: $0.count)
        }
        fuse_reply_iov(raw, &vectors, Int32(vectors.count))
        for segment in segments where segment.owner == nil {
            FileMapping.release(address: segment.address, count: segment.count)
        }
    }

    /// Sends `count` bytes at `offset` of `descriptor`, spliced where the kernel allows it.
    func replyFromFile(descriptor: Int32, offset: UInt64, count: Int) {
        if count == 0 {
            fuse_reply_buf(raw, nil, 0)
        } else {
            rfs_reply_fd(raw, descriptor, off_t(offset), count)
        }
    }
}

/// Who the files appear to belong to.
public struct Owner: Sendable, Equatable {
    public var uid: uid_t
    public var gid: gid_t
    /// Mode bits cleared from every file and the root directory.
    public var umask: mode_t = 0

    public init(uid: uid_t = getuid(), gid: gid_t = getgid()) {
        self.uid = uid
        self.gid = gid
    }
}

extension FileAttributes {
    /// The `struct stat` the kernel sees: read-only modes, and `st_blocks` counting cached bytes, so `ls -s`
    /// and `du` show download progress.
    func stat(owner: Owner) -> Glibc.stat {
        var info = Glibc.stat()
        info.st_ino = ino_t(inode)
        info.st_mode = isDirectory ? (S_IFDIR | (0o555 & ~owner.umask)) : (S_IFREG | (0o444 & ~owner.umask))
        // An archive's member keeps its own permission bits (less the umask); a symlink's are 0777, as everywhere.
        if let mode { info.st_mode = (info.st_mode & S_IFMT) | (mode_t(mode & 0o7777) & ~owner.umask) }
        if isSymlink { info.st_mode = S_IFLNK | 0o777 }
        info.st_nlink = isDirectory ? 2 : 1
        info.st_uid = owner.uid
        info.st_gid = owner.gid
        info.st_size = off_t(size)
        info.st_blocks = blkcnt_t((cachedBytes + 511) / 512)
        // What programs take as their buffer size (cp uses max(128 KiB, st_blksize)). 1 MiB made a warm cp run at
        // 0.6 to 0.7 of the same copy with 128 KiB buffers, which keep the data in the CPU's cache between the read
        // and the write; the kernel's READs to the daemon stay 1 MiB either way (its readahead sets them).
        info.st_blksize = 128 << 10
        let time = timespec(tv_sec: time_t(modificationTime), tv_nsec: 0)
        info.st_mtim = time
        info.st_ctim = time
        info.st_atim = time
        return info
    }
}
