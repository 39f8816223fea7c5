// A mounted session: create, mount, loop, unmount, destroy, in that order and torn down in reverse
// (libfuse's hello_ll.c). Unmounting follows DESIGN.md §6: fuse_session_exit alone does not return the loop, so
// an unmount request also detaches the mount with fusermount3, then waits for the loop thread, and only then
// unmounts and destroys the session. The daemon never stats its own mount point: not after exit, and not while
// mounted either (`deviceNumbers`), since a kill that comes while it waits for its own answer would hang the mount.

import CFUSE
import CLinux
import Dispatch
import Glibc
import RangeFSFileSystem
import RangeFSPlatform
import RangeFSProcess
import Logging
import RangeFSSystem

/// Why a mount could not be set up.
public enum MountError: Error, CustomStringConvertible, Sendable {
    case sessionFailed
    case mountFailed(String)
    case notInitialized(String)

    public var description: String {
        switch self {
        case .sessionFailed: "could not create the FUSE session (is /dev/fuse there? try: modprobe fuse)"
        case .mountFailed(let point):
            "could not mount on \(point) (does the folder exist and is it empty? is /dev/fuse usable?)"
        case .notInitialized(let point): "the kernel did not start the FUSE session on \(point)"
        }
    }
}

/// Mount-wide FUSE settings.
public struct MountSettings: Sendable, Equatable {
    public var allowOther = false
    public var owner = Owner()
    /// Permission bits cleared from every file's and the root's mode (`umask=`).
    public var umask: mode_t = 0
    public var attributeTimeout = 0.0
    public var entryTimeout = 1.0
    public var maxBackground: UInt32 = 64
    public var maxThreads: UInt32 = 8
    /// The kernel's readahead for this mount, in KiB (`/sys/class/bdi/MAJ:MIN/read_ahead_kb`, root only). Bigger
    /// readahead makes the kernel send 1 MiB READs instead of 128 KiB ones. Nil leaves the kernel's default.
    public var kernelReadaheadKiB: Int? = 1024
    /// Whether to negotiate FUSE passthrough with the kernel (`--passthrough auto`); see Passthrough.swift.
    public var passthrough = true

    public init() {}
}

/// The session pointer, for what outlives a FUSE request: the kernel notifier (KernelNotices.swift).
struct UnsafeSendableSession: @unchecked Sendable {
    // @unchecked Sendable: libfuse's notify functions are safe to call from any thread while the session lives.
    let pointer: OpaquePointer
}

/// A counting semaphore wrapper that can be stored in Sendable types.
final class DispatchSemaphoreBox: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func signal() { semaphore.signal() }
    func wait(seconds: Double) -> Bool { semaphore.wait(timeout: .now() + seconds) == .success }
}

/// A RangeFS mounted through libfuse's low-level API.
public final class FUSEMount: @unchecked Sendable {
    // @unchecked Sendable: `session` is created in init and destroyed in `finish`, which runs after the loop
    // thread ended; in between, libfuse itself is thread-safe for the calls made here.

    public let mountpoint: String
    private let session: OpaquePointer
    private let context: Unmanaged<FUSEContext>
    private let settings: MountSettings
    private let loopEnded = DispatchSemaphoreBox()
    private let logger: Logger
    /// The notifier the file system was made with: given the session once the kernel initialised it.
    private let kernel: FUSEKernelNotifier
    /// The passthrough capability the file system was made with: settled here (Passthrough.swift).
    private let passthrough: LockedBox<PassthroughMode>

    /// Creates the session and mounts it on `mountpoint`; the files are visible once `start` returns. `kernel` and
    /// `passthrough` are the ones `fileSystem` was made with.
    package init(fileSystem: RangeFS, kernel: FUSEKernelNotifier, passthrough: LockedBox<PassthroughMode>,
                 mountpoint: String, settings: MountSettings, logger: Logger) throws(MountError) {
        self.kernel = kernel
        self.passthrough = passthrough
        self.mountpoint = mountpoint
        self.settings = settings
        self.logger = logger
        var options = "ro,fsname=rangefs,subtype=rangefs,default_permissions"
        if settings.allowOther { options += ",allow_other" }
        let arguments = ["rangefs", "-o", options]
        var cArguments = arguments.map { strdup($0) }
        defer { cArguments.forEach { free($0) } }
        var owner = settings.owner
        owner.umask = settings.umask
        let box = FUSEContext(fileSystem: fileSystem, owner: owner,
                              attributeTimeout: settings.attributeTimeout, entryTimeout: settings.entryTimeout,
                              maxBackground: settings.maxBackground, logger: logger)
        // SAFETY: retained for the session's life, released in `finish` after fuse_session_destroy.
        let retained = Unmanaged.passRetained(box)
        context = retained
        var operations = makeOperations()
        let created = cArguments.withUnsafeMutableBufferPointer { argv -> OpaquePointer? in
            var args = fuse_args(argc: Int32(argv.count), argv: argv.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(&args, &operations, MemoryLayout<fuse_lowlevel_ops>.size, retained.toOpaque())
        }
        guard let created else {
            context.release()
            throw .sessionFailed
        }
        session = created
        guard fuse_session_mount(session, mountpoint) == 0 else {
            fuse_session_destroy(session)
            context.release()
            throw .mountFailed(mountpoint)
        }
        box.sessionDescriptor = fuse_session_fd(session)
        Passthrough.prepare(session: session, wanted: settings.passthrough, fileSystem: fileSystem,
                            mode: passthrough, logger: logger)
    }

    /// Starts the request loop on its own thread and waits until the kernel has initialised the session.
    public func start() throws(MountError) {
        startThread(name: "rangefs-fuse") { [self] in
            let config = fuse_loop_cfg_create()
            fuse_loop_cfg_set_max_threads(config, settings.maxThreads)
            fuse_loop_cfg_set_clone_fd(config, 0)
            let status = fuse_session_loop_mt(session, config)
            fuse_loop_cfg_destroy(config)
            if status != 0 { logger.debug("FUSE loop ended with \(status)") }
            loopEnded.signal()
        }
        guard context.takeUnretainedValue().initialized.wait(seconds: 30) else {
            throw .notInitialized(mountpoint)
        }
        Passthrough.settle(passthrough)
        if let kibibytes = settings.kernelReadaheadKiB { setKernelReadahead(kibibytes) }
        // SAFETY: the session lives until `finish`, which detaches it from the notifier before destroying it.
        kernel.attach(UnsafeSendableSession(pointer: session))
    }

    /// Raises the mount's readahead through sysfs; without permission (not root) the default stays.
    private func setKernelReadahead(_ kibibytes: Int) {
        guard let (major, minor) = Self.deviceNumbers(of: mountpoint) else {
            return logger.debug("kernel readahead left at its default (\(mountpoint) is not in /proc/self/mountinfo)")
        }
        let path = "/sys/class/bdi/\(major):\(minor)/read_ahead_kb"
        do {
            let file = try SystemFile(path: path, flags: O_WRONLY)
            try file.write(Array("\(kibibytes)\n".utf8), at: 0)
            logger.debug("kernel readahead for \(mountpoint) set to \(kibibytes) KiB")
        } catch {
            logger.debug("kernel readahead left at its default (\(error))")
        }
    }

    /// The device numbers of the mount at `path` (the last one mounted there, on top), from /proc/self/mountinfo.
    /// Never from a stat of the mount point: that is a GETATTR sent to this very daemon, and a daemon killed while
    /// it waits for its own answer can never exit (once a worker took the request, the kernel waits for the answer
    /// without regard to signals, and the workers are gone), so its mount would hang every program that touches it.
    static func deviceNumbers(of path: String) -> (major: UInt64, minor: UInt64)? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        var found: (major: UInt64, minor: UInt64)?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4, String(fields[4]).replacing("\\040", with: " ") == path else { continue }
            let numbers = fields[2].split(separator: ":")
            guard numbers.count == 2, let major = UInt64(numbers[0]), let minor = UInt64(numbers[1]) else { continue }
            found = (major, minor)
        }
        return found
    }

    /// Blocks until the mount goes away (fusermount3 -u, umount, or `requestUnmount`).
    public func waitUntilUnmounted() {
        while !loopEnded.wait(seconds: 3600) {}
        loopEnded.signal()
    }

    /// Ends the loop and detaches the mount; used for SIGINT and SIGTERM.
    public func requestUnmount() {
        fuse_session_exit(session)
        Self.detach(mountpoint, logger: logger)
    }

    /// Unmounts and frees the session; call after `waitUntilUnmounted`.
    public func finish() {
        kernel.attach(nil)
        fuse_session_unmount(session)
        fuse_session_destroy(session)
        context.release()
    }

    /// Runs `fusermount3 -u`, then `-uz` if the mount is busy, so the kernel drops the connection.
    public static func detach(_ mountpoint: String, logger: Logger) {
        for flags in ["-u", "-uz"] {
            do {
                if try Subprocess.run("/bin/fusermount3", [flags, mountpoint], timeout: 30).status == 0 { return }
            } catch {
                logger.error("cannot run fusermount3: \(error)")
                return
            }
        }
    }
}
