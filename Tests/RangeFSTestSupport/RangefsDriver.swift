// Runs the real `rangefs` binary against real mounts. Every mount made here is unmounted by `unmountAll`, and
// the daemon it started is waited for, so a failing test leaves no mount or process behind.

import Foundation
import Glibc

/// Drives the rangefs executable built next to the tests.
public final class RangefsDriver: @unchecked Sendable {
    // @unchecked Sendable: `mounted` is guarded by `lock`.
    public let binary: String
    private let lock = NSLock()
    private var mounted: [String] = []

    public init() throws {
        binary = try Self.locateBinary()
    }

    /// Whether /dev/fuse can be opened; when not, FUSE tests are skipped with a loud message.
    public static var fuseAvailable: Bool {
        let descriptor = open("/dev/fuse", O_RDWR)
        if descriptor >= 0 { close(descriptor) }
        return descriptor >= 0 && FileManager.default.isExecutableFile(atPath: "/bin/fusermount3")
    }

    public static let fuseMissingMessage =
        "SKIPPING FUSE TEST: /dev/fuse or fusermount3 is missing; install fuse3 and load the fuse module"

    /// `rangefs` arguments..., with a time limit.
    @discardableResult
    public func run(_ arguments: [String], timeout: Double = 60) throws -> ProcessResult {
        try Shell.run(binary, arguments, timeout: timeout)
    }

    /// `rangefs mount MOUNTPOINT URL... --cache CACHE extra...` in the background mode; records the mount. With
    /// `openFileLimit`, the daemon runs under that limit on open files, soft and hard (`prlimit --nofile`).
    @discardableResult
    public func mount(_ mountpoint: String, urls: [String], cache: String, extra: [String] = [],
                      openFileLimit: Int? = nil) throws -> ProcessResult {
        // mkdir, not FileManager: a dead mount fails stat, and FileManager then takes it for a file.
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST {
            throw TestSupportError("mkdir \(mountpoint): \(String(cString: strerror(errno)))")
        }
        let arguments = ["mount", mountpoint] + urls + ["--cache", cache] + extra
        let result = try openFileLimit.map { limit in
            try Shell.run("/usr/bin/prlimit", ["--nofile=\(limit):\(limit)", binary] + arguments, timeout: 120)
        } ?? run(arguments)
        if isMounted(mountpoint) { record(mountpoint) }
        return result
    }

    public func record(_ mountpoint: String) {
        lock.lock()
        mounted.append(mountpoint)
        lock.unlock()
    }

    /// The PID of the daemon that holds the cache's lock (it writes `pid N` into it), if any.
    public func daemonPID(cache: String) -> pid_t? {
        let text = (try? String(contentsOfFile: cache + "/lock", encoding: .utf8)) ?? ""
        return text.split(separator: " ").dropFirst().first.flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Unmounts with `rangefs unmount` and waits until the daemon released the cache lock (it has exited).
    public func unmount(_ mountpoint: String, cache: String? = nil) throws {
        let result = try run(["unmount", mountpoint])
        guard result.status == 0 else { throw TestSupportError("unmount failed: \(result.stderr)") }
        lock.lock()
        mounted.removeAll { $0 == mountpoint }
        lock.unlock()
        if let cache { try waitForUnlock(cache) }
    }

    /// Waits until no process holds the cache's lock, i.e. the daemon finished its last commit and exited.
    public func waitForUnlock(_ cache: String, timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let descriptor = open(cache + "/lock", O_RDWR)
            if descriptor < 0 { return }
            let free = flock(descriptor, LOCK_EX | LOCK_NB) == 0
            close(descriptor)
            if free { return }
            usleep(20_000)
        }
        throw TestSupportError("the rangefs daemon for \(cache) did not exit")
    }

    /// Unmounts everything this driver mounted (lazily, so a failing test with open files still cleans up).
    public func unmountAll() {
        lock.lock()
        let points = mounted
        mounted.removeAll()
        lock.unlock()
        for point in points {
            _ = try? Shell.run("/bin/fusermount3", ["-uz", point], timeout: 10)
        }
    }

    public func isMounted(_ mountpoint: String) -> Bool {
        let text = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first.map(String.init) == mountpoint }
    }

    private static func locateBinary() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["RANGEFS_BIN"] { return explicit }
        // The test bundle lives in the build products folder, next to the rangefs executable.
        var candidates: [String] = []
        if let executable = Bundle.main.executablePath {
            candidates.append(URL(fileURLWithPath: executable).deletingLastPathComponent().path + "/rangefs")
        }
        for bundle in Bundle.allBundles {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().path + "/rangefs")
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        throw TestSupportError("cannot find the rangefs binary next to the tests (\(candidates)); set RANGEFS_BIN")
    }
}
