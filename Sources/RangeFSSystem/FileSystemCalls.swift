import CLinux
import Glibc

/// Small-file and folder helpers for the cache's metadata files.
public enum FileSystemCalls {
    /// `O_DIRECT`, which Swift's Glibc module hides.
    package static var directFlag: Int32 { rfs_o_direct() }

    /// Gives the heap's free pages back to the system (`malloc_trim`), after a burst that built large temporary
    /// structures (a listing of 100,000 names): a hint, with nothing to report.
    package static func releaseFreeMemory() { _ = rfs_release_free_memory() }

    /// Whether the process (or thread) `pid` still exists: `kill(pid, 0)`, which sends nothing. A pid of 0 or
    /// less (unknown) counts as alive.
    package static func processExists(_ pid: Int32) -> Bool {
        pid <= 0 || kill(pid, 0) == 0 || Errno.current == .notPermitted
    }

    /// Replaces `path` with `bytes` atomically: write a temp file, fsync it, rename it over, fsync the folder.
    /// A reader (or a crash) sees the old contents or the new, never a mix. Safe for concurrent callers of one
    /// path, in this process or others: each writes its own temporary file (created exclusively, under a random
    /// name, as git's lockfiles are), so two writers never share an inode, and the last rename wins whole. A
    /// failure (a full disk) leaves the old file as it was and no temporary file behind. The new file has `mode`
    /// (less the umask): 0600 unless the caller says otherwise, which `credentials.json` relies on. The one way
    /// files are replaced in rangefs, the executable's included (`package`, not part of the core's public API).
    package static func replaceAtomically(_ path: String, with bytes: [UInt8],
                                          mode: mode_t = 0o600) throws(SystemError) {
        let temporary = try writeReplacement(for: path, with: bytes, synchronizing: true, mode: mode)
        try moveReplacement(temporary, over: path)
        try synchronizeDirectory(containing: path)
    }

    /// The first half of an atomic replace: `bytes` in a temporary file of its own beside `path`, fsynced if
    /// `synchronizing` (else the caller makes it durable, e.g. with one `synchronizeFileSystem` for many files).
    /// Returns the temporary file's path, for `moveReplacement`; nothing is left behind if it fails.
    package static func writeReplacement(for path: String, with bytes: [UInt8], synchronizing: Bool,
                                 mode: mode_t = 0o600) throws(SystemError) -> String {
        let temporary = temporaryPath(for: path)
        do throws(SystemError) {
            // Created afresh (O_EXCL): never a leftover file with another mode, nor one another writer has open.
            let file = try SystemFile(path: temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode)
            try file.write(bytes, at: 0)
            if synchronizing { try retryingEINTR("fsync", temporary) { fsync(file.descriptor) } }
        } catch {
            // Nothing is left behind by a failed write (a full disk).
            unlink(temporary)
            throw error
        }
        return temporary
    }

    /// A name for a temporary file beside `path` that nothing else uses: `NAME.tmp.` and 64 random bits. Not
    /// the process id and a counter: a process killed before its rename leaves its temporary file, and a later
    /// daemon with the same pid (in a container, often) would meet it under the very name it wants and fail
    /// with EEXIST. `removeTemporaryFiles` finds these by their `.tmp.`.
    static func temporaryPath(for path: String) -> String {
        let random = String(UInt64.random(in: .min ... .max), radix: 16)
        return path + ".tmp." + String(repeating: "0", count: 16 - random.count) + random
    }

    /// The second half of an atomic replace: renames `temporary` over `path` (removing it if that fails). The
    /// rename is durable once the folder is synchronized.
    package static func moveReplacement(_ temporary: String, over path: String) throws(SystemError) {
        do throws(SystemError) {
            try retryingEINTR("rename", path) { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Creates `path`, which must not exist, holding `bytes` at `offset` (a hole before them); not synchronized
    /// (the caller's next commit makes it durable). A failed write removes it again.
    package static func createFile(_ path: String, with bytes: [UInt8], at offset: UInt64 = 0) throws(SystemError) {
        let file = try SystemFile(path: path, flags: O_WRONLY | O_CREAT | O_EXCL)
        do throws(SystemError) {
            try file.write(bytes, at: offset)
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Flushes every file and folder of the file system that holds `file` to stable storage (`syncfs(2)`): one
    /// flush for a group commit of many files, where a flush per file would cost a disk cache flush each. It
    /// reports a write-back error of that file system since `file` was opened, or since the last report to it.
    package static func synchronizeFileSystem(of file: SystemFile) throws(SystemError) {
        try retryingEINTR("syncfs", file.path) { rfs_syncfs(file.descriptor) }
    }

    /// fsyncs the folder that holds `path`, so a rename or create in it is durable.
    package static func synchronizeDirectory(containing path: String) throws(SystemError) {
        let folder = parentDirectory(of: path)
        let directory = try SystemFile(path: folder, flags: O_RDONLY | O_DIRECTORY)
        try retryingEINTR("fsync", folder) { fsync(directory.descriptor) }
    }

    /// What tells one version of the file at `path` from the next: device, inode, size and modification time
    /// (ns); a rewrite by rename gives a new inode, one in place a new time or size. Nil when there is no file.
    package static func version(of path: String) -> [Int64]? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return [Int64(status.st_dev), Int64(status.st_ino), Int64(status.st_size), Int64(status.st_mtim.tv_sec),
                Int64(status.st_mtim.tv_nsec)]
    }

    /// The whole contents of a small file, or nil if it does not exist.
    package static func readSmallFile(_ path: String, limit: Int = 64 << 20) throws(SystemError) -> [UInt8]? {
        let file: SystemFile
        do {
            file = try SystemFile(path: path, flags: O_RDONLY)
        } catch where error.errno == .noEntry {
            return nil
        }
        let size = try file.status().size
        guard size <= UInt64(limit) else { throw SystemError(call: "read", path: path, errno: .fileTooBig) }
        return try file.read(at: 0, count: Int(size))
    }

    /// Creates `path` and its missing parents with `mode`; an existing folder is fine.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        _ = try makeDirectory(path, mode: mode)
    }

    /// Creates the folder `path` (and its missing parents) with `mode`. Returns true if this call created it,
    /// false if it existed: a new folder holds no file, so its first files need not replace anything. Makes
    /// `path` itself first, so a new folder in an existing parent costs one `mkdir`, and parents are made only
    /// when it says they are missing.
    package static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(SystemError) -> Bool {
        if mkdir(path, mode) == 0 { return true }
        switch Errno.current {
        case .exists:
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
                throw SystemError(call: "mkdir", path: path, errno: Errno(rawValue: ENOTDIR))
            }
            return false
        case .noEntry:
            let parent = parentDirectory(of: path)
            guard parent != path, parent != "/", parent != "." else { throw SystemError(call: "mkdir", path: path) }
            _ = try makeDirectory(parent, mode: mode)
            if mkdir(path, mode) == 0 { return true }
            if Errno.current == .exists { return false }
            throw SystemError(call: "mkdir", path: path)
        default:
            throw SystemError(call: "mkdir", path: path)
        }
    }

    /// The names in `folder` (without `.` and `..`), or nil if it cannot be read.
    package static func names(in folder: String) -> [String]? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let item = readdir(directory) {
            // SAFETY: readdir's entry is valid until the next readdir call; the name is copied out before it.
            let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether `folder` holds a name for which `predicate` holds; reads no further than the first (false for a
    /// folder that cannot be read).
    package static func containsName(in folder: String, where predicate: (String) -> Bool) -> Bool {
        guard let directory = opendir(folder) else { return false }
        defer { closedir(directory) }
        while let item = readdir(directory) {
            // SAFETY: as in `names(in:)`.
            let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." && predicate(name) { return true }
        }
        return false
    }

    /// Removes the temporary files `writeReplacement` left in `folder` (`NAME.tmp.RANDOM`, from a process killed
    /// before its rename); a folder that cannot be read is left as it is.
    package static func removeTemporaryFiles(in folder: String) {
        for name in names(in: folder) ?? [] where name.contains(".tmp.") { unlink(folder + "/" + name) }
    }

    /// Removes `path` if it exists.
    package static func removeFile(_ path: String) throws(SystemError) {
        if unlink(path) != 0 && Errno.current != .noEntry {
            throw SystemError(call: "unlink", path: path)
        }
    }

    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
