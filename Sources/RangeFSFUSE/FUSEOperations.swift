// The low-level operation table. Each handler copies its arguments out of the kernel request, calls one RangeFS
// method and replies; reads reply later, from whichever thread stores the last block they need. The handlers are
// top-level functions in this library, never in main.swift, where they would inherit @MainActor and trap on a
// FUSE worker thread (DESIGN.md §6).

import CFUSE
import Glibc
import Logging
import RangeFSFileSystem
import RangeFSSystem

/// What the handlers share: the filesystem and the mount's settings. Reached through the session's userdata.
final class FUSEContext: Sendable {
    /// The largest READ the kernel sends: 1 MiB, 256 pages, the most the kernel allows (see `rangefsInit`).
    static let maxReadBytes = 1 << 20
    let fileSystem: RangeFS
    let owner: Owner
    /// Seconds the kernel may cache attributes. Zero for files, so `ls -s` shows progress as it happens.
    let attributeTimeout: Double
    let entryTimeout: Double
    let maxBackground: UInt32
    let logger: Logger
    let initialized = DispatchSemaphoreBox()
    /// The session's /dev/fuse descriptor, for the backing-file ioctls (set once, before the loop starts).
    nonisolated(unsafe) var sessionDescriptor: Int32 = -1
    /// The backing files of passthrough handles (Passthrough.swift).
    let backings = LockedBox(Passthrough.Backings())
    /// Reads not answered yet, by ID. Whoever removes an ID (the read's completion or its INTERRUPT) replies.
    let pendingReads = PendingReads()

    /// Registers a read that may wait; returns its ID.
    func beginRead() -> UInt { pendingReads.begin() }

    /// Claims the right to answer read `id`; false if it was already answered.
    func finishRead(_ id: UInt) -> Bool { pendingReads.finish(id) }

    init(fileSystem: RangeFS, owner: Owner, attributeTimeout: Double, entryTimeout: Double, maxBackground: UInt32,
         logger: Logger) {
        self.fileSystem = fileSystem
        self.owner = owner
        self.attributeTimeout = attributeTimeout
        self.entryTimeout = entryTimeout
        self.maxBackground = maxBackground
        self.logger = logger
    }
}

/// SAFETY: userdata is the FUSEContext that FUSEMount keeps retained for the session's whole life.
func context(_ req: fuse_req_t?) -> FUSEContext {
    Unmanaged<FUSEContext>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}

private func name(_ pointer: UnsafePointer<CChar>?) -> String {
    pointer.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: strlen($0)), as: UTF8.self) } ?? ""
}

func makeOperations() -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()
    ops.`init` = rangefsInit
    ops.lookup = rangefsLookup
    ops.getattr = rangefsGetattr
    ops.readlink = rangefsReadlink
    ops.open = rangefsOpen
    ops.read = rangefsRead
    ops.release = rangefsRelease
    ops.opendir = rangefsOpendir
    ops.readdir = rangefsReaddir
    ops.readdirplus = rangefsReaddirplus
    ops.releasedir = rangefsReleasedir
    ops.getxattr = rangefsGetxattr
    ops.listxattr = rangefsListxattr
    ops.statfs = rangefsStatfs
    return ops
}

private func rangefsInit(_ userdata: UnsafeMutableRawPointer?, _ conn: UnsafeMutablePointer<fuse_conn_info>?) {
    // SAFETY: userdata is the retained FUSEContext, as in `context(_:)`.
    let context = Unmanaged<FUSEContext>.fromOpaque(userdata!).takeUnretainedValue()
    if let conn {
        conn.pointee.max_background = context.maxBackground
        conn.pointee.congestion_threshold = context.maxBackground * 3 / 4
        let wanted = rfs_cap_async_read() | rfs_cap_splice_write() | rfs_cap_splice_move()
        conn.pointee.want |= conn.pointee.capable & wanted
        // libfuse turns auto_inval_data on by default. With attribute timeout 0 it makes the kernel send a GETATTR
        // before every read(2): 4,096 round trips for a 512 MiB cp. A remote change drops the kernel's pages
        // explicitly instead (RangeFS.forgetKernelPages), and new opens of a new version skip keep_cache.
        conn.pointee.want &= ~rfs_cap_auto_inval_data()
        // READs of up to 256 pages (libfuse derives max_pages from max_write), so that each 1 MiB window of the
        // kernel's readahead is one READ. With 255 pages, the limit until issue 47, a window came as a READ of
        // 255 pages and one of a page: 770 READs for a 512 MiB cp instead of 514, each a round trip and a reply.
        // Replies come from the cache file's mapping. Only a file that cannot be mapped replies from its
        // descriptor; its 1 MiB reply plus header no longer fits the default 1 MiB pipe of a mount without root,
        // and libfuse then reads it into a buffer instead of splicing it: a rare path paying for the common one.
        conn.pointee.max_write = UInt32(FUSEContext.maxReadBytes)
    }
    context.initialized.signal()
}

private func rangefsLookup(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ namePointer: UnsafePointer<CChar>?) {
    let context = context(req), request = FUSERequest(raw: req!)
    // Answered now, or from the completion of the listing or probe it needs.
    context.fileSystem.lookup(parent: UInt64(parent), name: name(namePointer)) { result in
        switch result {
        case .success(let attributes): request.replyEntry(attributes, context: context)
        case .failure(let error): request.fail(error)
        }
    }
}

private func rangefsGetattr(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    let context = context(req), request = FUSERequest(raw: req!)
    switch context.fileSystem.attributes(of: UInt64(inode)) {
    case .success(let attributes):
        // Cached only as long as the file system says (`kernelCacheSeconds`): the kernel answers stat from its
        // cache even after the daemon died, which would hide a dead mount, so the root keeps its attributes 1 s;
        // and st_blocks must show progress as it happens.
        request.replyAttributes(attributes, owner: context.owner,
                                timeout: max(context.attributeTimeout, attributes.kernelCacheSeconds))
    case .failure(let error): request.fail(error)
    }
}

/// A symlink inside an archive shown as a folder (`--archives`): its target as stored.
private func rangefsReadlink(_ req: fuse_req_t?, _ inode: fuse_ino_t) {
    let context = context(req), request = FUSERequest(raw: req!)
    switch context.fileSystem.readLink(UInt64(inode)) {
    case .success(let target): fuse_reply_readlink(req, target)
    case .failure(let error): request.fail(error)
    }
}

private func rangefsOpen(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    let context = context(req), request = FUSERequest(raw: req!)
    guard let fi else { return request.fail(.invalidArgument) }
    if fi.pointee.flags & O_ACCMODE != O_RDONLY { return request.fail(.readOnly) }
    // The kernel's fuse_file_info lives only during this call; the reply (maybe after a probe) fills a copy.
    let info = FileInfo(fi.pointee)
    context.fileSystem.open(UInt64(inode)) { result in
        switch result {
        case .success(let opened):
            if let path = opened.passthroughFile {
                switch Passthrough.backing(for: UInt64(inode), handle: opened.handle, path: path, context: context) {
                case .success(let backingID):
                    // A reply the kernel refused means no handle: no RELEASE will come for it.
                    if rfs_reply_open_passthrough(request.raw, opened.handle, backingID) != 0 {
                        Passthrough.release(handle: opened.handle, context: context)
                        context.fileSystem.release(opened.handle)
                    }
                    return
                case .failure(let failure):
                    context.fileSystem.passthroughFailed(opened.handle, disable: failure.disables ? failure.reason : nil)
                }
            }
            var reply = info.value
            reply.fh = opened.handle
            // Remote content is immutable for a given ETag, so pages the kernel cached stay valid across opens,
            // until the remote file changes.
            rfs_fi_set_keep_cache(&reply, opened.keepCache ? 1 : 0)
            // A file of unknown size: the kernel would stop reading at the size it was told (see `OpenedFile`).
            rfs_fi_set_direct_io(&reply, opened.directIO ? 1 : 0)
            rfs_fi_set_noflush(&reply, 1)
            fuse_reply_open(request.raw, &reply)
        case .failure(let error): request.fail(error)
        }
    }
}

/// A copy of the kernel's `fuse_file_info`, to answer an open from another thread.
private struct FileInfo: @unchecked Sendable {
    // @unchecked Sendable: a plain C struct copied by value; its pointer fields are unused by open replies.
    let value: fuse_file_info
    init(_ value: fuse_file_info) { self.value = value }
}

private func rangefsRead(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ size: Int, _ offset: off_t,
                         _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    let context = context(req), request = FUSERequest(raw: req!)
    guard let fi, offset >= 0 else { return request.fail(.invalidArgument) }
    // Register for INTERRUPT before the read can complete: after a reply, the request must not be touched.
    // The ID travels as the callback's data pointer, so nothing has to outlive the request.
    let id = context.beginRead()
    fuse_req_interrupt_func(req, rangefsInterruptRead, UnsafeMutableRawPointer(bitPattern: id))
    // The pid of the process the READ is for (page-cache readahead included): a transfer whose readers all
    // exited stops (EntryUse.swift).
    let pid = Int32(fuse_req_ctx(req)?.pointee.pid ?? 0)
    context.fileSystem.read(handle: fi.pointee.fh, offset: UInt64(offset), count: size, pid: pid) { result in
        guard context.finishRead(id) else { return }  // interrupted, and already answered EINTR
        switch result {
        case .success(.mapped(let address, let count)):
            request.replyMapped(address: address, count: count)
        case .success(.file(let lease, let offset, let count)):
            request.replyFromFile(descriptor: lease.descriptor, offset: offset, count: count)
        case .success(.segments(let segments)):
            request.replySegments(segments)
        case .success(.bytes(let bytes)):
            request.replyBytes(bytes)
        case .failure(let error):
            request.fail(error)
        }
    }
}

/// The kernel gave up waiting for a read (the reader got a signal, e.g. Ctrl-C): answer EINTR now. The fetch
/// goes on, and its blocks are cached for the next reader.
private func rangefsInterruptRead(_ req: fuse_req_t?, _ data: UnsafeMutableRawPointer?) {
    let context = context(req)
    if let data, context.finishRead(UInt(bitPattern: data)) {
        fuse_reply_err(req, FileSystemError.interrupted.errno)
    }
}

private func rangefsRelease(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    let context = context(req)
    if let fi {
        Passthrough.release(handle: fi.pointee.fh, context: context)
        context.fileSystem.release(fi.pointee.fh)
    }
    fuse_reply_err(req, 0)
}

private func rangefsOpendir(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    let context = context(req), request = FUSERequest(raw: req!)
    guard let fi else { return request.fail(.invalidArgument) }
    switch context.fileSystem.openDirectory(UInt64(inode)) {
    case .success(let handle):
        fi.pointee.fh = handle
        fuse_reply_open(req, fi)
    case .failure(let error): request.fail(error)
    }
}

private func rangefsReleasedir(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    if let fi { context(req).fileSystem.releaseDirectory(fi.pointee.fh) }
    fuse_reply_err(req, 0)
}

private func rangefsReaddir(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ size: Int, _ offset: off_t,
                            _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    readDirectory(req, inode, handle: fi?.pointee.fh ?? 0, size: size, offset: offset, plus: false)
}

/// READDIRPLUS: the names with their attributes, so that `ls -l` needs no LOOKUP per file (see
/// `RangeFS.readDirectory`).
private func rangefsReaddirplus(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ size: Int, _ offset: off_t,
                                _ fi: UnsafeMutablePointer<fuse_file_info>?) {
    readDirectory(req, inode, handle: fi?.pointee.fh ?? 0, size: size, offset: offset, plus: true)
}

/// Answers READDIR(PLUS) at `offset` once the directory is listed: entry n of [".", "..", children...] carries
/// offset n + 1, the offset the kernel passes back to continue.
private func readDirectory(_ req: fuse_req_t?, _ inode: fuse_ino_t, handle: UInt64, size: Int, offset: off_t,
                          plus: Bool) {
    let context = context(req), request = FUSERequest(raw: req!)
    let directory = UInt64(inode)
    let (from, count) = DirectoryPage.children(offset: Int64(offset), bufferSize: size, plus: plus)
    context.fileSystem.readDirectory(directory, handle: handle, from: from, count: count,
                                     attributes: plus) { result in
        let children: [RangeFS.DirectoryEntry]
        switch result {
        case .success(let entries): children = entries
        case .failure(let error): return request.fail(error)
        }
        let rows = DirectoryPage.rows(
            offset: Int64(offset), directory: directory, parent: context.fileSystem.parent(of: directory),
            children: children.map { ($0.position, $0.name, $0.inode, $0.isDirectory) })
        var buffer = [UInt8](repeating: 0, count: size)
        var used = 0
        for row in rows {
            let needed = buffer.withUnsafeMutableBytes { raw -> Int in
                let place = raw.baseAddress!.assumingMemoryBound(to: CChar.self) + used
                if plus {
                    var entry = fuse_entry_param()
                    if let child = row.child, let known = children[child].attributes {
                        entry = FUSERequest.entryParameter(known, context: context)
                    } else {
                        entry.attr.st_ino = ino_t(row.inode)  // node ID 0: no attributes, the kernel looks it up
                        entry.attr.st_mode = DirectoryPage.fileType(isDirectory: row.isDirectory, isSymlink: false)
                    }
                    return fuse_add_direntry_plus(request.raw, place, size - used, row.name, &entry, off_t(row.offset))
                }
                var info = Glibc.stat()
                info.st_ino = ino_t(row.inode)
                // The type is all a plain READDIR tells (d_type): an archive's symlink member says it is one.
                let isSymlink = row.child.flatMap { children[$0].attributes?.isSymlink } ?? false
                info.st_mode = DirectoryPage.fileType(isDirectory: row.isDirectory, isSymlink: isSymlink)
                return fuse_add_direntry(request.raw, place, size - used, row.name, &info, off_t(row.offset))
            }
            if used + needed > size { break }
            used += needed
        }
        request.replyBytes(Array(buffer[..<used]))
    }
}

private func rangefsGetxattr(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ namePointer: UnsafePointer<CChar>?,
                             _ size: Int) {
    let context = context(req), request = FUSERequest(raw: req!)
    switch context.fileSystem.extendedAttribute(name(namePointer), of: UInt64(inode)) {
    case .success(let value): replySized(request, Array(value.utf8), size: size)
    case .failure(let error): request.fail(error)
    }
}

private func rangefsListxattr(_ req: fuse_req_t?, _ inode: fuse_ino_t, _ size: Int) {
    let context = context(req), request = FUSERequest(raw: req!)
    switch context.fileSystem.extendedAttributeNames(of: UInt64(inode)) {
    case .success(let names): replySized(request, names.flatMap { Array($0.utf8) + [0] }, size: size)
    case .failure(let error): request.fail(error)
    }
}

/// Answers an xattr request by the size protocol (`SizedAnswer`).
private func replySized(_ request: FUSERequest, _ value: [UInt8], size: Int) {
    switch SizedAnswer(value, bufferSize: size) {
    case .size(let count): fuse_reply_xattr(request.raw, count)
    case .tooSmall(let needed): request.fail(.bufferTooSmall(needed: needed))
    case .value(let bytes): request.replyBytes(bytes)
    }
}

private func rangefsStatfs(_ req: fuse_req_t?, _ inode: fuse_ino_t) {
    // The catalog keeps the totals as files come and go: no copy or sort of every file on each `df`.
    let totals = context(req).fileSystem.totals
    var info = statvfs()
    info.f_bsize = 4096
    info.f_frsize = 4096
    info.f_blocks = fsblkcnt_t(totals.bytes / 4096 + (totals.bytes % 4096 == 0 ? 0 : 1))
    info.f_files = fsfilcnt_t(totals.files + 1)
    info.f_namemax = 255
    fuse_reply_statfs(req, &info)
}
