import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Base for tests that mount for real: one nginx per class, a fresh mount point and cache per test, and
/// everything unmounted afterwards. Without /dev/fuse the tests are skipped with a loud message.
class MountTestCase: XCTestCase {
    static var origin: NginxOrigin!
    var driver: RangefsDriver!
    var scratch: TemporaryDirectory!
    var mountpoint: String { scratch.path + "/mnt" }
    var cache: String { scratch.path + "/cache" }

    override class func tearDown() {
        origin?.stop()
        origin = nil
        super.tearDown()
    }

    override func setUpWithError() throws {
        guard RangefsDriver.fuseAvailable else {
            print(String(repeating: "!", count: 72) + "\n" + RangefsDriver.fuseMissingMessage + "\n"
                  + String(repeating: "!", count: 72))
            throw XCTSkip(RangefsDriver.fuseMissingMessage)
        }
        if Self.origin == nil { Self.origin = try NginxOrigin() }
        driver = try RangefsDriver()
        scratch = try TemporaryDirectory(prefix: "mount")
    }

    override func tearDown() {
        driver?.unmountAll()
        if let cache = scratch.map({ $0.path + "/cache" }) { try? driver?.waitForUnlock(cache) }
        scratch = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    var origin: NginxOrigin { Self.origin }

    /// Options for a test that counts requests across listings: no listing is fetched again by the clock midway.
    /// By default a listing older than `--dir-cache-time` (60 s) is fetched again at the next visit, which brings
    /// back the dead links that left it; a slow, loaded machine can take that long, and its count then depends on
    /// the machine's speed (issue 35: one re-listing made a count of 100,002 requests 100,003).
    static let steadyListings = ["--dir-cache-time", "86400"]

    /// Mounts `urls` and fails the test unless the mount is up.
    @discardableResult
    func mount(_ urls: [String], extra: [String] = [], expectStatus: Int32 = 0) throws -> ProcessResult {
        let result = try driver.mount(mountpoint, urls: urls, cache: cache, extra: extra)
        XCTAssertEqual(result.status, expectStatus, "rangefs mount: \(result.stderr)")
        XCTAssertTrue(driver.isMounted(mountpoint), "not mounted: \(result.stderr)")
        return result
    }

    /// The checkout these tests were built from (for its scripts: mount-scripts/install.sh, package.sh).
    func repositoryRoot() -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    /// A daemon in the foreground, so the test knows its PID.
    func startForeground(_ urls: [String], extra: [String] = []) throws -> BackgroundProcess {
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(mountpoint)") }
        let daemon = try BackgroundProcess(driver.binary, ["mount", "-f", mountpoint] + urls + ["--cache", cache] + extra,
                                           logPath: scratch.path + "/daemon.log")
        let deadline = Date().addingTimeInterval(20)
        while !driver.isMounted(mountpoint) {
            guard Date() < deadline, daemon.isRunning else {
                throw TestSupportError("no mount: " + ((try? String(contentsOfFile: scratch.path + "/daemon.log", encoding: .utf8)) ?? ""))
            }
            usleep(20_000)
        }
        driver.record(mountpoint)
        return daemon
    }

    /// The lines of a mount's stderr that report a problem: without the one that says where the log goes (on a
    /// machine without syslog, every mount says it).
    func problemLines(_ stderr: String) -> [String] {
        stderr.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("rangefs: logging to ") }
    }

    /// Reads `count` bytes at `offset` of a file with pread(2).
    func pread(_ path: String, offset: Int, count: Int) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: count)
        let got = Glibc.pread(descriptor, &buffer, count, off_t(offset))
        guard got >= 0 else { throw TestSupportError("pread \(path): \(String(cString: strerror(errno)))") }
        return Array(buffer.prefix(got))
    }

    /// pread's errno for `count` bytes at `offset`, or 0 if it read them.
    func readError(_ path: String, offset: Int, count: Int) -> Int32 {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: count)
        return Glibc.pread(descriptor, &buffer, count, off_t(offset)) < 0 ? errno : 0
    }

    func fileBytes(_ path: String, offset: Int, count: Int) throws -> [UInt8] {
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return [UInt8](try handle.read(upToCount: count) ?? Data())
    }

    /// `status --json` of the mount at `mountpoint` (this test's by default).
    func statusJSON(_ mountpoint: String? = nil) throws -> [String: Any] {
        let result = try driver.run(["status", "--mount", mountpoint ?? self.mountpoint, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// Body bytes `origin` sent for `path` in 206 answers (data), without the 1-byte probes.
    func dataBytes(_ origin: NginxOrigin, _ path: String) -> UInt64 {
        origin.accessLog().filter { $0.path == path && $0.status == 206 && $0.range != "bytes=0-0" }
            .reduce(0) { $0 + $1.bodyBytes }
    }

    /// Body bytes nginx sent for `path`, not counting the 1-byte mount-time probes.
    func bytesFetched(_ path: String) -> UInt64 {
        origin.accessLog().filter { $0.path == path && $0.range != "bytes=0-0" }.reduce(0) { $0 + $1.bodyBytes }
    }

    func statFile(_ path: String) throws -> stat {
        var info = stat()
        guard stat(path, &info) == 0 else { throw TestSupportError("stat \(path): \(String(cString: strerror(errno)))") }
        return info
    }
}
