import Dispatch
import FoundationEssentials
import Glibc
import Logging
import RangeFSControl
import RangeFSFUSE
import RangeFSPlatform
import RangeFSSystem

/// Checks on the mount point before mounting: it must be a directory, and not a live or dead mount.
enum MountPoint {
    /// `path` made absolute against the working directory, without following links (a dead mount cannot be
    /// resolved, and must still be recognised).
    static func absolute(_ path: String) -> String {
        var full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        while full.count > 1 && full.hasSuffix("/") { full.removeLast() }
        var parts: [Substring] = []
        for part in full.split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The filesystem type mounted at `path`, from /proc/self/mountinfo, or nil if nothing is mounted there.
    static func mountedType(at path: String) -> String? {
        // Without /proc nothing can be told mounted; mount(2) itself then reports what is wrong.
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        var found: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            let point = String(fields[4]).replacing("\\040", with: " ")
            if point == path { found = String(fields[dash + 1]) }
        }
        return found
    }

    /// What a mount point's file system answers, seen from outside its daemon.
    enum Health: Equatable {
        /// Not a FUSE mount, or one that answered.
        case fine
        /// A FUSE mount whose daemon is gone (killed, crashed): the kernel answers ENOTCONN ("Transport endpoint
        /// is not connected").
        case dead
        /// A FUSE mount whose daemon is alive but did not answer in time (stopped, stuck).
        case notAnswering
    }

    /// How long a stat of a FUSE mount point may take before its daemon counts as not answering, in seconds.
    static let answerLimit = 2.0

    /// The health of the FUSE mount at `path`. Only asked where no daemon answered its control socket, since
    /// statvfs of a live mount goes to its daemon; asked on another thread, so that a stopped daemon costs the
    /// caller `limit` seconds, never a hang.
    static func health(of path: String, within limit: Double = answerLimit) -> Health {
        guard let type = mountedType(at: path), type.hasPrefix("fuse") else { return .fine }
        guard let code = statvfsError(path, within: limit) else { return .notAnswering }
        return code == ENOTCONN ? .dead : .fine
    }

    /// The errno of `statvfs(path)` (0 when it succeeded), or nil when it did not return within `limit` seconds.
    /// A thread left waiting on a stopped daemon ends with the process (the kernel's wait for FUSE is killable).
    static func statvfsError(_ path: String, within limit: Double) -> Int32? {
        let answer = StatAnswer()
        startThread(name: "rangefs-statfs") {
            var info = statvfs()
            let code = statvfs(path, &info) == 0 ? 0 : errno
            answer.code.withLock { $0 = code }
            answer.done.signal()
        }
        guard answer.done.wait(timeout: .now() + limit) == .success else { return nil }
        return answer.code.withLock { $0 }
    }

    /// What the thread of `statvfsError` hands back.
    private final class StatAnswer: Sendable {
        let code = LockedBox<Int32?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    /// Among the rangefs mounts (from /proc/self/mountinfo) whose control socket in `directory` is one of
    /// `refused` (a socket file that exists but that no daemon listens on), the first that is dead or does not
    /// answer. Mounts with no such socket are never asked: a stat of another user's stopped mount would wait.
    static func unhealthyRangefsMount(refused: Set<String>, directory: String) -> (path: String, health: Health)? {
        guard !refused.isEmpty else { return nil }
        // Without /proc no mount can be told dead; the caller then says only that no daemon answers.
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        let points = text.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count,
                  fields[dash + 1] == "fuse.rangefs" else { return nil }
            return String(fields[4]).replacing("\\040", with: " ")
        }
        for point in points where refused.contains(ControlSocket.path(forMountpoint: point, in: directory)) {
            let health = health(of: point)
            if health != .fine { return (point, health) }
        }
        return nil
    }

    /// The one line that says `path`'s daemon is alive but does not answer, and what to do.
    static func notAnsweringMessage(_ path: String) -> String {
        "the mount at \(path) does not answer: a stat of it got no answer within \(Int(answerLimit)) s, so its daemon "
            + "is stopped (SIGSTOP, a debugger) or stuck; resume it (kill -CONT PID) or end it (kill PID, then "
            + "fusermount3 -uz \(path))"
    }

    /// The one line that says a mount is dead and how to clear it.
    static func deadMountMessage(_ path: String) -> String {
        "the mount at \(path) is dead: its daemon is gone (killed or crashed), and reading it fails with 'Transport "
            + "endpoint is not connected'; clear it with: fusermount3 -uz \(path) (rangefs mount on it clears it too)"
    }

    /// Why `path` could not be unmounted, in words, given what fusermount3 said: "Invalid argument" for a path
    /// nothing is mounted on, "No such file or directory" for one that does not exist.
    static func unmountFailure(_ path: String, fusermount message: String) -> String {
        var info = stat()
        if stat(path, &info) != 0 && errno == ENOENT { return "it does not exist" }
        if mountedType(at: path) == nil && mountedType(at: realPath(path)) == nil {
            return "nothing is mounted there; findmnt -t fuse.rangefs lists the rangefs mounts"
        }
        return message.trimmed().replacing("fusermount3: ", with: "")
    }

    /// `path` with its links resolved, or `path` itself when it cannot be.
    private static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Returns a one-line problem, or nil when `path` can be mounted on. A stale rangefs mount (its daemon was
    /// killed) is cleared; any other mount is left alone and explained. A directory that holds files is refused
    /// unless `nonEmpty`: mounted over, its files would vanish from sight without a word.
    static func prepare(_ path: String, nonEmpty: Bool = false, logger: Logger) -> String? {
        if let type = mountedType(at: path) {
            // statvfs always asks the file system (stat may be answered from the attributes the kernel keeps), so a
            // killed daemon shows as ENOTCONN at once.
            guard let code = statvfsError(path, within: answerLimit) else {
                return "\(path) is already mounted (\(type)) and does not answer (its daemon is stopped or stuck); "
                    + "unmount it first: fusermount3 -uz \(path)"
            }
            if code == ENOTCONN {
                guard type == "fuse.rangefs" else {
                    return "\(path) is a dead FUSE mount (\(type)); clear it with: fusermount3 -uz \(path)"
                }
                FUSEMount.detach(path, logger: logger)
                if mountedType(at: path) == type {
                    return "\(path) is a stale rangefs mount that could not be cleared; run: fusermount3 -uz \(path)"
                }
                printError("rangefs: cleared a stale mount on \(path) left by a killed rangefs")
            } else {
                return "\(path) is already mounted (\(type)); unmount it first: rangefs unmount \(path)"
            }
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            return "mount point \(path) does not exist; create it with: mkdir -p \(path)"
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { return "mount point \(path) is not a directory" }
        if !nonEmpty, let name = firstEntry(of: path) {
            return "mount point \(path) is not empty (it holds '\(name)'), and mounting would hide its files; "
                + "empty it, choose an empty directory, or pass --nonempty (-o nonempty) to mount over them"
        }
        return nil
    }

    /// The name of one entry of directory `path` other than `.` and `..`, or nil when it has none (or cannot be
    /// read: mount(2) then says what is wrong).
    static func firstEntry(of path: String) -> String? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { return name }
        }
        return nil
    }
}
