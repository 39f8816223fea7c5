import Foundation
import Glibc
import Logging
import RangeFSFUSE

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
            let point = String(fields[4]).replacingOccurrences(of: "\\040", with: " ")
            if point == path { found = String(fields[dash + 1]) }
        }
        return found
    }

    /// Whether `path` is a FUSE mount whose daemon is gone (killed, crashed): the kernel answers
    /// ENOTCONN ("Transport endpoint is not connected") for it. Only asked where no daemon answered, since
    /// statvfs of a live mount goes to its daemon.
    static func isDead(_ path: String) -> Bool {
        guard let type = mountedType(at: path), type.hasPrefix("fuse") else { return false }
        var info = statvfs()
        return statvfs(path, &info) != 0 && errno == ENOTCONN
    }

    /// The rangefs mounts (from /proc/self/mountinfo) whose daemon is gone.
    static func deadRangefsMounts() -> [String] {
        // Without /proc no mount can be told dead; the caller then says only that no daemon answers.
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        let points = text.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count,
                  fields[dash + 1] == "fuse.rangefs" else { return nil }
            return String(fields[4]).replacingOccurrences(of: "\\040", with: " ")
        }
        return points.filter(isDead)
    }

    /// The one line that says a mount is dead and how to clear it.
    static func deadMountMessage(_ path: String) -> String {
        "the mount at \(path) is dead: its daemon is gone (killed or crashed), and reading it fails with 'Transport "
            + "endpoint is not connected'; clear it with: fusermount3 -uz \(path) (rangefs mount on it clears it too)"
    }

    /// Returns a one-line problem, or nil when `path` can be mounted on. A stale rangefs mount (its daemon was
    /// killed) is cleared; any other mount is left alone and explained.
    static func prepare(_ path: String, logger: Logger) -> String? {
        if let type = mountedType(at: path) {
            // statvfs always asks the file system (stat may be answered from the attributes the kernel keeps), so a
            // killed daemon shows as ENOTCONN at once.
            var info = statvfs()
            if statvfs(path, &info) != 0 && errno == ENOTCONN {
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
        return nil
    }
}
