import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 6: rangefs mounted the way Linux users mount things (mount(8), fstab, systemd), as root.
final class SystemMountTests: MountTestCase {
    var helperInstalled = false
    var listFile: String { scratch.path + "/files.list" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard getuid() == 0 else { throw XCTSkip("SKIPPING: mount(8) tests need root") }
    }

    override func tearDown() {
        if helperInstalled { unlink("/sbin/mount.fuse.rangefs") }
        super.tearDown()
    }

    /// Installs rangefs into a scratch prefix and its helper as /sbin/mount.fuse.rangefs (removed in tearDown).
    func installHelper() throws {
        guard !FileManager.default.fileExists(atPath: "/sbin/mount.fuse.rangefs") else {
            throw XCTSkip("SKIPPING: /sbin/mount.fuse.rangefs already exists; not replacing an installed rangefs")
        }
        let result = try Shell.run(repositoryRoot() + "/mount-scripts/install.sh",
                                   ["--prefix", scratch.path + "/prefix", "--sbindir", "/sbin", "--no-systemd",
                                    "--binary", driver.binary])
        XCTAssertEqual(result.status, 0, result.stderr)
        helperInstalled = true
    }

    func serveListed() throws -> String {
        let digest = try origin.serveRandomFile("listed.bin", size: 2 << 20)
        try (origin.url("listed.bin") + "\n").write(toFile: listFile, atomically: false, encoding: .utf8)
        XCTAssertEqual(mkdir(mountpoint, 0o755), 0)
        return digest
    }

    /// Waits until no daemon holds the cache lock: the daemon exited after the unmount.
    func assertDaemonExited() {
        XCTAssertNoThrow(try driver.waitForUnlock(cache), "the daemon did not exit after umount")
    }

    // 1. mount -t fuse.rangefs LISTFILE DIR -o cache=X,_netdev,nofail; umount DIR unmounts and the daemon exits.
    func testMountDashTWithAListFile() throws {
        try installHelper()
        let digest = try serveListed()
        let mounted = try Shell.run("/bin/mount", ["-t", "fuse.rangefs", listFile, mountpoint,
                                                   "-o", "cache=\(cache),_netdev,nofail"])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        driver.record(mountpoint)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/listed.bin"), digest)
        XCTAssertEqual(try Shell.run("/bin/umount", [mountpoint]).status, 0)
        XCTAssertFalse(driver.isMounted(mountpoint))
        assertDaemonExited()
    }

    // 2. A line in a temporary fstab (mount -T FILE DIR) mounts the same way.
    func testFstabLineMountsTheSameWay() throws {
        try installHelper()
        let digest = try serveListed()
        let fstab = scratch.path + "/fstab"
        try "# test fstab\n\(listFile)  \(mountpoint)  fuse.rangefs  cache=\(cache),_netdev,nofail,noauto,x-systemd.automount  0  0\n"
            .write(toFile: fstab, atomically: false, encoding: .utf8)
        let mounted = try Shell.run("/bin/mount", ["-T", fstab, mountpoint])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        driver.record(mountpoint)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/listed.bin"), digest)
        XCTAssertEqual(try Shell.run("/bin/umount", [mountpoint]).status, 0)
        assertDaemonExited()
    }

    // 3. Background mode, a single unreachable URL: non-zero exit, the error on stderr, no stale mount.
    func testUnreachableURLInBackgroundFailsWithoutAStaleMount() throws {
        XCTAssertEqual(mkdir(mountpoint, 0o755), 0)
        let result = try driver.run(["mount", mountpoint, "http://127.0.0.1:1/unreachable.iso", "--cache", cache])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("http://127.0.0.1:1/unreachable.iso: connection refused"), result.stderr)
        XCTAssertFalse(driver.isMounted(mountpoint))
        var info = stat()
        XCTAssertEqual(stat(mountpoint, &info), 0, "the directory is an ordinary, live directory")
    }

    func testInstallScriptInstallsTheBinaryTheHelperAndTheUnit() throws {
        let prefix = scratch.path + "/p", sbin = scratch.path + "/sbin", units = scratch.path + "/units"
        let result = try Shell.run(repositoryRoot() + "/mount-scripts/install.sh",
                                   ["--prefix", prefix, "--sbindir", sbin, "--unitdir", units, "--binary", driver.binary])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: prefix + "/bin/rangefs"))
        let helper = try String(contentsOfFile: sbin + "/mount.fuse.rangefs", encoding: .utf8)
        XCTAssertTrue(helper.contains("rangefs=\"\(prefix)/bin/rangefs\""), "the helper calls the installed binary")
        let unit = try String(contentsOfFile: units + "/rangefs@.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("Type=notify"))
        XCTAssertTrue(unit.contains("ExecStart=\(prefix)/bin/rangefs mount -f"))
        XCTAssertEqual(try Shell.run(prefix + "/bin/rangefs", ["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0.1.0")
    }

    func testOwnerGroupAndUmaskOptions() throws {
        _ = try serveListed()
        let result = try driver.run([listFile, mountpoint, "-o", "cache=\(cache),uid=1234,gid=4321,umask=027,default_permissions"])
        XCTAssertEqual(result.status, 0, result.stderr)
        driver.record(mountpoint)
        let file = try statFile(mountpoint + "/listed.bin")
        XCTAssertEqual(file.st_uid, 1234)
        XCTAssertEqual(file.st_gid, 4321)
        XCTAssertEqual(file.st_mode & 0o777, 0o440)
        XCTAssertEqual(try statFile(mountpoint).st_mode & 0o777, 0o550)
    }

    // systemd Type=notify: READY=1 arrives once the mount is ready.
    func testForegroundDaemonNotifiesSystemdWhenReady() throws {
        _ = try serveListed()
        let socketPath = scratch.path + "/notify.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in Array(socketPath.utf8).enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let daemon = try BackgroundProcess(driver.binary, ["mount", "-f", mountpoint, "--list", listFile, "--cache", cache],
                                           environment: ["NOTIFY_SOCKET": socketPath])
        driver.record(mountpoint)
        var buffer = [UInt8](repeating: 0, count: 512)
        let got = recv(listener, &buffer, buffer.count, 0)
        XCTAssertGreaterThan(got, 0, "no sd_notify message")
        let message = String(decoding: buffer.prefix(max(0, got)), as: UTF8.self)
        XCTAssertTrue(message.contains("READY=1"), message)
        XCTAssertTrue(driver.isMounted(mountpoint), "READY=1 must come after the mount is in place")
        // SIGTERM right after READY=1, as systemd may send it: a clean exit, promptly.
        let started = Date()
        let status = daemon.stop(signal: SIGTERM, timeout: 20)
        XCTAssertEqual(status.map { $0 & 0x7f }, 0, "the daemon was killed, it did not exit")
        XCTAssertEqual(status.map { ($0 >> 8) & 0xff }, 0)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "SIGTERM took too long to unmount")
        XCTAssertFalse(driver.isMounted(mountpoint))
    }
}
