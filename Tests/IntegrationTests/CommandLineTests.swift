import Foundation
import Glibc
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// How the rangefs command behaves around mounting: shapes, signals, stale mounts, errors.
final class CommandLineTests: MountTestCase {
    func serveSmallFile(_ name: String = "small.bin") throws -> String {
        try origin.serveRandomFile(name, size: 1 << 20)
    }

    func testListFileWithNamesAndComments() throws {
        let digest = try serveSmallFile()
        try origin.serve("notes.txt", bytes: Array("notes\n".utf8))
        let list = scratch.path + "/urls.txt"
        try """
        # mounted by the test
        renamed.bin=\(origin.url("small.bin"))

        \(origin.url("notes.txt"))
        """.write(toFile: list, atomically: false, encoding: .utf8)
        try mount([], extra: ["--list", list])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["notes.txt", "renamed.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/renamed.bin"), digest)
    }

    func testFstabShapeWithOptionsAfterTheMountPoint() throws {
        let digest = try serveSmallFile()
        let list = scratch.path + "/fstab-list.txt"
        try origin.url("small.bin").write(toFile: list, atomically: false, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let result = try driver.run([list, mountpoint, "-o", "cache=\(cache),_netdev,nofail,ro,x-systemd.automount"])
        if driver.isMounted(mountpoint) { driver.record(mountpoint) }
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/small.bin"), digest)
    }

    func testUnknownMountOptionIsNamed() throws {
        let result = try driver.run([origin.url("x"), mountpoint, "-o", "cache=/tmp/x,bogus=1"])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.contains("unknown mount option 'bogus=1'"), result.stderr)
    }

    func testMissingMountPointIsExplained() throws {
        let result = try driver.run(["mount", scratch.path + "/nowhere", origin.url("x"), "--cache", cache])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("mkdir -p \(scratch.path)/nowhere"), result.stderr)
    }

    func testWritesAreRejectedAsReadOnly() throws {
        _ = try serveSmallFile()
        try mount([origin.url("small.bin")])
        XCTAssertEqual(open(mountpoint + "/small.bin", O_WRONLY), -1)
        XCTAssertEqual(errno, EROFS)
        XCTAssertEqual(open(mountpoint + "/new.bin", O_WRONLY | O_CREAT, 0o644), -1)
        XCTAssertEqual(errno, EROFS)
    }

    func testSecondDaemonOnTheSameCacheIsRefused() throws {
        _ = try serveSmallFile()
        try mount([origin.url("small.bin")])
        let other = scratch.path + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let result = try driver.mount(other, urls: [origin.url("small.bin")], cache: cache)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("is in use by another rangefs"), result.stderr)
        XCTAssertFalse(driver.isMounted(other))
    }

    func testForegroundSIGTERMUnmountsCleanly() throws {
        _ = try serveSmallFile()
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try BackgroundProcess(driver.binary, ["mount", "-f", mountpoint, origin.url("small.bin"),
                                                           "--cache", cache], logPath: scratch.path + "/fg.log")
        try waitUntilMounted()
        driver.record(mountpoint)
        _ = try pread(mountpoint + "/small.bin", offset: 0, count: 4096)
        let status = daemon.stop(signal: SIGTERM, timeout: 20)
        XCTAssertEqual(status.map { $0 & 0x7f }, 0, "the daemon was killed, it did not exit")
        XCTAssertEqual(status.map { ($0 >> 8) & 0xff }, 0, (try? String(contentsOfFile: scratch.path + "/fg.log", encoding: .utf8)) ?? "")
        XCTAssertFalse(driver.isMounted(mountpoint))
        // The clean exit committed the bitmap: what was read is durable.
        let store = try CacheStore(root: cache, logger: .init(label: "test"))
        XCTAssertGreaterThan(try XCTUnwrap(store.storedEntry(for: origin.url("small.bin"))).present.setCount, 0)
    }

    func testStaleMountAfterSIGKILLIsClearedByTheNextMount() throws {
        let digest = try serveSmallFile()
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try BackgroundProcess(driver.binary, ["mount", "-f", mountpoint, origin.url("small.bin"),
                                                           "--cache", cache])
        try waitUntilMounted()
        driver.record(mountpoint)
        daemon.stop(signal: SIGKILL)
        // statvfs always reaches the file system (a stat may be answered from the attributes the kernel keeps).
        var info = statvfs()
        XCTAssertEqual(statvfs(mountpoint, &info), -1)
        XCTAssertEqual(errno, ENOTCONN, "a killed daemon leaves a dead mount behind")

        let result = try mount([origin.url("small.bin")])
        XCTAssertTrue(result.stderr.contains("cleared a stale mount on \(mountpoint)"), result.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/small.bin"), digest)
    }

    /// The daemon never stats its own mount point once mounted: that is a request to itself, and a kill while it
    /// waited for its own answer left a daemon that could not exit and a mount that hung whoever touched it (the
    /// readahead's device number came from such a stat, and a kill -9 test hung on it once). strace of the
    /// daemon's own threads (no child: it is killed, not unmounted) shows no stat-like call naming the mount point
    /// after the mount(2).
    func testTheDaemonNeverStatsItsOwnMountPoint() throws {
        let strace = "/usr/bin/strace"
        guard FileManager.default.isExecutableFile(atPath: strace) else {
            if ProcessInfo.processInfo.environment["CI"] != nil { return XCTFail("CI needs \(strace) (apt: strace)") }
            throw XCTSkip("SKIPPING: \(strace) is missing (apt: strace)")
        }
        let digest = try serveSmallFile()
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let trace = scratch.path + "/stats.trace"
        let daemon = try BackgroundProcess(strace, [
            "-f", "-qq", "-o", trace, "-e", "trace=mount,stat,lstat,newfstatat,statx,statfs,fstatfs,access,faccessat2",
            driver.binary, "mount", "-f", mountpoint, origin.url("small.bin"), "--cache", cache])
        try waitUntilMounted()
        driver.record(mountpoint)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/small.bin"), digest)
        XCTAssertEqual(try driver.run(["status", "--mount", mountpoint]).status, 0)
        // The daemon itself (the cache's lock names it), not strace, which would let it go on untraced.
        let lock = try String(contentsOfFile: cache + "/lock", encoding: .utf8).split(separator: " ")
        let pid = try XCTUnwrap(lock.count > 1 ? pid_t(lock[1].trimmingCharacters(in: .whitespacesAndNewlines)) : nil,
                                "no pid in \(cache)/lock: \(lock)")
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertNotNil(daemon.waitForExit(timeout: 60), "strace did not end with its daemon")
        _ = try Shell.run("/bin/fusermount3", ["-uz", mountpoint])
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        let mounted = try XCTUnwrap(lines.firstIndex { $0.contains("mount(") && $0.contains("\"\(mountpoint)\"") },
                                    "no mount(2) of \(mountpoint) in the trace: \(lines.suffix(20))")
        let named = lines[(mounted + 1)...].filter { $0.contains("\"\(mountpoint)\"") || $0.contains("\"\(mountpoint)/") }
        XCTAssertEqual(named, [], "the daemon stat'ed its own mount point")
    }

    func testAMountedDirectoryIsNotMountedTwice() throws {
        _ = try serveSmallFile()
        try mount([origin.url("small.bin")])
        let again = try driver.run(["mount", mountpoint, origin.url("small.bin"), "--cache", scratch.path + "/c2"])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.contains("is already mounted"), again.stderr)
    }

    func testVerifyReportsAndRepairsDamagedBlocks() throws {
        let digest = try serveSmallFile()
        try mount([origin.url("small.bin")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/small.bin"), digest)
        let busy = try driver.run(["verify", "--cache", cache])
        XCTAssertEqual(busy.status, 3, "a mounted cache is locked")
        XCTAssertTrue(busy.stderr.contains("in use by another rangefs"), busy.stderr)
        try driver.unmount(mountpoint, cache: cache)

        XCTAssertEqual(try driver.run(["verify", "--cache", cache]).stdout.hasPrefix("OK "), true)
        let data = try CacheStore(root: cache, logger: .init(label: "test")).dataPath(for: origin.url("small.bin"))
        try driver.waitForUnlock(cache)
        try SystemFile(path: data, flags: O_RDWR).write([1, 2, 3], at: 300_000)
        let found = try driver.run(["verify", "--cache", cache])
        XCTAssertEqual(found.status, 1)
        XCTAssertTrue(found.stdout.contains("1 of 16 blocks fail their CRC"), found.stdout)
        XCTAssertEqual(try driver.run(["verify", "--cache", cache, "--repair"]).status, 1)
        XCTAssertEqual(try driver.run(["verify", "--cache", cache]).status, 0)
        try mount([origin.url("small.bin")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/small.bin"), digest)
    }

    func waitUntilMounted(timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !driver.isMounted(mountpoint) {
            guard Date() < deadline else { throw TestSupportError("\(mountpoint) was not mounted in \(timeout) s") }
            usleep(20_000)
        }
    }
}
