// FUSE passthrough (DESIGN.md §6): the kernel reads a complete file's cache data file itself, so a warm read
// costs the daemon nothing. libfuse 3.14 has no API for it; the session's requests and replies go through
// CLinux's passthrough io (passthrough.c, the one place that reads and amends raw protocol bytes), which takes
// passthrough in the INIT reply when the kernel offers it. Then each passthrough open registers the data file as
// a backing file (FUSE_DEV_IOC_BACKING_OPEN) and answers the OPEN with FOPEN_PASSTHROUGH and its id.
//
// An inode has one backing file, shared by its passthrough handles and released with the last of them. The
// ioctl needs CAP_SYS_ADMIN: without it, or without kernel support, every file is read through the daemon as
// before, and the log and `status` say why. Which opens qualify is the core's decision (RangeFS.open).

import CFUSE
import CLinux
import Glibc
import Logging
import RangeFSFileSystem
import RangeFSSystem

enum Passthrough {
    /// The backing files registered with the kernel, by inode, and the passthrough handles that use them.
    struct Backings {
        var byInode: [UInt64: (id: Int32, users: Int)] = [:]
        var inodeOfHandle: [UInt64: UInt64] = [:]
    }

    /// Why a backing file could not be had.
    struct Failure: Error {
        let reason: String
        /// Whether no later open can succeed either (no privilege, no kernel support).
        let disables: Bool
    }

    /// Routes the session through the passthrough io if passthrough is wanted and may work; else records why not.
    /// Between fuse_session_mount and the loop's start, before the kernel's INIT is read.
    static func prepare(session: OpaquePointer, wanted: Bool, fileSystem: RangeFS, mode: LockedBox<PassthroughMode>,
                        logger: Logger) {
        func off(_ reason: String) {
            mode.withLock { $0 = .off(reason) }
        }
        guard wanted, fileSystem.settings.passthrough else { return off("--passthrough off") }
        guard rfs_has_cap_sys_admin() != 0 else {
            return off("the daemon lacks CAP_SYS_ADMIN, which registering a backing file needs (mount as root)")
        }
        rfs_passthrough_want(1)
        guard rfs_session_custom_io(session, rfs_io_read, rfs_io_writev, rfs_io_splice) == 0 else {
            rfs_passthrough_want(0)
            return off("libfuse did not take the custom io that negotiates it")
        }
    }

    /// Once the session is initialised: records whether the INIT reply took passthrough (the mount logs it once
    /// it is ready, so the line goes to the log, not to the terminal of `rangefs mount`).
    static func settle(_ passthrough: LockedBox<PassthroughMode>) {
        let pending = passthrough.withLock { $0 == .pending }
        if pending {
            // The INIT reply follows the init callback at once; wait for it to be written.
            for _ in 0..<200 where rfs_passthrough_init_replied() == 0 { usleep(5000) }
            let mode: PassthroughMode = rfs_passthrough_negotiated() != 0 ? .on
                : rfs_passthrough_offered() == 0
                    ? .off("the kernel does not offer it (it needs Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH)")
                    : .off("the INIT reply could not take it")
            passthrough.withLock { $0 = mode }
        }
    }

    /// The backing id for `inode`'s data file at `path`, registered now if no passthrough handle of it is open,
    /// counted as used by `handle`.
    static func backing(for inode: UInt64, handle: UInt64, path: String,
                        context: FUSEContext) -> Result<Int32, Failure> {
        context.backings.withLock { backings -> Result<Int32, Failure> in
            if let known = backings.byInode[inode] {
                backings.byInode[inode] = (known.id, known.users + 1)
                backings.inodeOfHandle[handle] = inode
                return .success(known.id)
            }
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                return .failure(Failure(reason: "cannot open \(path): \(String(cString: strerror(errno)))", disables: false))
            }
            defer { close(descriptor) }  // the kernel holds the file itself once it is registered
            let id = rfs_backing_open(context.sessionDescriptor, descriptor)
            guard id > 0 else {
                let code = Errno.current
                let message = code.description
                // No permission: no CAP_SYS_ADMIN in the initial namespace; the others: not supported here.
                let disables = [Errno.notPermitted, .invalidArgument, .notATerminal, .notSupported].contains(code)
                let why = code == .notPermitted
                    ? "\(message): registering a backing file needs CAP_SYS_ADMIN in the initial user namespace"
                    : message
                return .failure(Failure(reason: "the kernel refused a backing file (\(why))", disables: disables))
            }
            backings.byInode[inode] = (id, 1)
            backings.inodeOfHandle[handle] = inode
            return .success(id)
        }
    }

    /// `handle` is released: its inode's backing file is unregistered with its last passthrough handle.
    static func release(handle: UInt64, context: FUSEContext) {
        context.backings.withLock { backings in
            guard let inode = backings.inodeOfHandle.removeValue(forKey: handle),
                  let known = backings.byInode[inode]
            else { return }
            if known.users > 1 {
                backings.byInode[inode] = (known.id, known.users - 1)
            } else {
                backings.byInode[inode] = nil
                _ = rfs_backing_close(context.sessionDescriptor, known.id)
            }
        }
    }
}
