// The control channel's protocol: one JSON object per line each way. A client connects to the mount's unix
// socket, sends one request line, reads one response line, and closes.

import RangeFSFileSystem
import RangeFSPlatform
import RangeFSSystem

/// A request to a running mount.
public struct ControlRequest: Codable, Sendable, Equatable {
    public enum Command: String, Codable, Sendable {
        case status, add, rm, pause, resume, verify, pin, evict
        /// Which process serves the mount (its `pid`), at once: `rangefs unmount` waits for it to exit.
        case identify
        /// The mount's counters as Prometheus text, in `message` (what `--metrics` serves).
        case metrics
        /// One file's block map in `width` cells, in `message` (what `rangefs ui` draws): each cell a digit, 0 none
        /// to 9 all of its blocks local.
        case blockmap
    }

    public var command: Command
    /// The file a command applies to (a name in the mount), or nil for all where `all` is set.
    // Read only by the control service, here in the core; the client sets them through `init`.
    var name: String?
    var url: String?
    /// For add: other URLs of the same file.
    var mirrors: [String]?
    /// For add: the file's digest as the user gave it (`sha256=HEX`).
    var checksum: String?
    var all: Bool?
    var keepData: Bool?
    /// For add: shown as its archive's folder (for a directory URL, its archives) without `--archives`.
    var archives: Bool?
    /// For blockmap: how many cells (1 to `ControlService.blockMapMaxWidth`).
    var width: Int?
    /// For status: only the files whose cache entry is open (those that can change without a new look), and no
    /// totals: what `rangefs ui` asks each second, at a cost that does not grow with the mount's files.
    var active: Bool?

    public init(command: Command, name: String? = nil, url: String? = nil, mirrors: [String]? = nil,
                checksum: String? = nil, all: Bool? = nil, keepData: Bool? = nil, archives: Bool? = nil,
                width: Int? = nil, active: Bool? = nil) {
        self.command = command
        self.name = name
        self.url = url
        self.mirrors = mirrors
        self.checksum = checksum
        self.all = all
        self.keepData = keepData
        self.archives = archives
        self.width = width
        self.active = active
    }
}

/// One line of a mount's log.
public struct LogRecord: Codable, Sendable, Equatable {
    /// Local time, `YYYY-MM-DD HH:MM:SS`.
    public var time: String
    public var level: String
    public var message: String

    public init(time: String, level: String, message: String) {
        self.time = time
        self.level = level
        self.message = message
    }
}

/// The answer to a request.
public struct ControlResponse: Codable, Sendable, Equatable {
    public var ok: Bool
    public var error: String?
    public var files: [FileStatus]?
    /// For add: the name the new file got. For verify: a one-line summary.
    public var message: String?
    public var mountpoint: String?
    /// For identify: the daemon's process ID.
    public var pid: Int32?
    /// For status: what the mount runs with that weakens it (e.g. --insecure).
    public var warnings: [String]?
    /// For status: the sums over every file, also those the answer leaves out.
    public var totals: StatusTotals?
    /// For status: the mount's last warnings and errors, oldest first, so that they can be seen without its log.
    public var recentErrors: [LogRecord]?
    /// For status: whether the kernel reads complete files itself (FUSE passthrough), or why not.
    public var passthrough: String?
    /// For status: the proxy chain, with the group in use and the proxies that failed; nil without --proxy.
    public var proxy: String?

    init(ok: Bool, error: String? = nil, files: [FileStatus]? = nil, message: String? = nil,
                mountpoint: String? = nil, pid: Int32? = nil) {
        self.ok = ok
        self.error = error
        self.files = files
        self.message = message
        self.mountpoint = mountpoint
        self.pid = pid
    }

    public static func failure(_ message: String) -> ControlResponse { ControlResponse(ok: false, error: message) }

    enum CodingKeys: String, CodingKey {
        case ok, error, files, message, mountpoint, pid, warnings, totals, passthrough, proxy
        case recentErrors = "recent_errors"
    }
}

/// Where a mount's control socket lives: `$XDG_RUNTIME_DIR/rangefs/`, else `/run/rangefs/` for root, else
/// `/tmp/rangefs-UID/`; the folder must be a real folder of the user, mode 0700 (`ControlSocketFolder`, which both
/// ends check), and the socket is named after the mount point.
public enum ControlSocket {
    public static func directory(environment: [String: String], uid: UInt32) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/rangefs" }
        return uid == 0 ? "/run/rangefs" : "/tmp/rangefs-\(uid)"
    }

    public static func path(forMountpoint mountpoint: String, in directory: String) -> String {
        directory + "/" + String(SHA256.hexDigest(mountpoint).prefix(16)) + ".sock"
    }
}
