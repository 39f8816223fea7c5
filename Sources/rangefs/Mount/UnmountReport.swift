// What a daemon says about its cache as it exits. `rangefs unmount` is not the daemon's parent (the daemon runs
// in its own session), so it cannot see its exit status: the daemon writes this report beside its control socket
// once its last commit is over, and `rangefs unmount` reads it after the daemon exited. So the command says
// "committed" only when the daemon did, and otherwise how much of the mount's data was kept.

import FoundationEssentials
import Glibc
import Logging
import RangeFSControl
import RangeFSSystem

struct UnmountReport: Codable, Equatable {
    /// Whether everything the mount stored is committed (and everything fetched was stored).
    var committed: Bool
    /// If not: how much the cache keeps, what it does not, and why (`CacheStore.close`).
    var notKept: String?

    /// The report of the mount at `mountpoint`: the control socket's path with `.exit` for `.sock`.
    static func path(forMountpoint mountpoint: String) -> String {
        let directory = ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid())
        let socket = ControlSocket.path(forMountpoint: mountpoint, in: directory)
        return String(socket.dropLast(".sock".count)) + ".exit"
    }

    /// A report left by an earlier mount there says nothing of this one: removed before a mount serves and
    /// before an unmount.
    static func clear(mountpoint: String) {
        unlink(path(forMountpoint: mountpoint))
    }

    /// In the daemon, after its last commit: writes `report` (0600, replaced atomically through the core's one
    /// atomic replace, whose temporary file no other writer shares).
    static func write(_ report: UnmountReport, mountpoint: String, logger: Logger) {
        let target = path(forMountpoint: mountpoint)
        do {
            try FileSystemCalls.replaceAtomically(target, with: Array(try JSONEncoder().encode(report)), mode: 0o600)
        } catch {
            logger.warning("cannot write \(target) for rangefs unmount: \(error)")
        }
    }

    /// In `rangefs unmount`, once the daemon exited: its report (removed), or nil if it wrote none or it cannot
    /// be read (the caller then says it does not know, never that the cache was committed).
    static func take(mountpoint: String) -> UnmountReport? {
        let source = path(forMountpoint: mountpoint)
        // A report in a folder another user could write to may be theirs (issue 45): no report. An unusable
        // folder is no report either.
        guard (try? ControlSocketFolder.check(FileSystemCalls.parentDirectory(of: source), uid: geteuid())) == true
        else { return nil }
        defer { unlink(source) }
        guard let data = FileManager.default.contents(atPath: source) else { return nil }
        // A damaged report is no report: the caller says it does not know.
        return try? JSONDecoder().decode(UnmountReport.self, from: data)
    }
}
