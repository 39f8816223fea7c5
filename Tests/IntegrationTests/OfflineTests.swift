import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 15: mounting from the cache while the origin is down, never losing the mounted set, unmount meaning
/// stopped, a bound on a read of a hung origin, and clear answers to bad input. All with default options.
final class OfflineTests: MountTestCase {
    override func tearDown() {
        // A test that stopped the shared origin brings it back for the next one.
        if let origin = Self.origin, !origin.isRunning { try? origin.resume() }
        super.tearDown()
    }

    func statusFiles() throws -> [[String: Any]] {
        let result = try driver.run(["status", mountpoint, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        return try XCTUnwrap(status["files"] as? [[String: Any]])
    }

    func state(of name: String) throws -> String? {
        try statusFiles().first { $0["name"] as? String == name }?["state"] as? String
    }

    // 1. Two complete files and a partial one; the origin goes down; the same cache mounts with the URLs and with
    //    none, serves what is cached, fails an uncached block with EIO, and catches up once the origin is back.
    func testCachedFilesMountWhileTheOriginIsDownAndCatchUpWhenItReturns() throws {
        let first = try origin.serveRandomFile("first.bin", size: 1 << 20)
        let second = try origin.serveRandomFile("second.bin", size: 2 << 20)
        let partial = try origin.serveRandomFile("partial.bin", size: 8 << 20)
        let urls = ["first.bin", "second.bin", "partial.bin"].map(origin.url)
        // Setting up a partly cached file needs background fill off; the offline mounts below use the defaults.
        try mount(urls, extra: ["--prefetch", "none"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/first.bin"), first)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/second.bin"), second)
        XCTAssertEqual(try pread(mountpoint + "/partial.bin", offset: 0, count: 65536).count, 65536)
        try driver.unmount(mountpoint, cache: cache)
        origin.halt()

        for given in [urls, []] {
            let result = try mount(given)
            XCTAssertTrue(result.stderr.contains("3 file(s) mounted from the cache alone"), result.stderr)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(),
                           ["first.bin", "partial.bin", "second.bin"])
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/first.bin"), first)
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/second.bin"), second)
            XCTAssertEqual(try pread(mountpoint + "/partial.bin", offset: 0, count: 65536).count, 65536)
            XCTAssertEqual(readError(mountpoint + "/partial.bin", offset: 4 << 20, count: 4096), EIO)
            let files = try statusFiles()
            XCTAssertEqual(files.map { $0["state"] as? String }, ["offline", "offline", "offline"])
            XCTAssertTrue((files[0]["last_error"] as? String ?? "").contains("connection refused"), "\(files)")
            try driver.unmount(mountpoint, cache: cache)
        }

        try mount([])
        try origin.resume()
        let deadline = Date().addingTimeInterval(30)
        while try state(of: "partial.bin") == "offline", Date() < deadline { usleep(200_000) }
        XCTAssertNotEqual(try state(of: "partial.bin"), "offline", "revalidated once the origin answered")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/partial.bin"), partial)
    }

    // 1b. A file that changed on the server while it was offline gets its new version once the server answers.
    func testAFileThatChangedWhileOfflineIsReplacedWhenTheServerAnswers() throws {
        try origin.serveRandomFile("moving.bin", size: 1 << 20)
        try mount([origin.url("moving.bin")])
        _ = try Shell.sha256(of: mountpoint + "/moving.bin")
        try driver.unmount(mountpoint, cache: cache)
        origin.halt()
        try mount([])
        XCTAssertEqual(try state(of: "moving.bin"), "offline")
        let changed = try origin.serveRandomFile("moving.bin", size: 3 << 20)
        try origin.resume()
        let deadline = Date().addingTimeInterval(30)
        while try statFile(mountpoint + "/moving.bin").st_size != 3 << 20, Date() < deadline { usleep(200_000) }
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/moving.bin"), changed)
    }

    // 2. With the origin down and one good URL on another server, nothing leaves the saved set; once the origin is
    //    back, a mount without URLs lists all three. Only `rangefs rm` removes one.
    func testAFailedProbeNeverShrinksTheSavedSet() throws {
        let other = try NginxOrigin()
        defer { other.stop() }
        try origin.serveRandomFile("x.bin", size: 1 << 20)
        try origin.serveRandomFile("y.bin", size: 1 << 20)
        let good = try other.serveRandomFile("z.bin", size: 1 << 20)
        try mount([origin.url("x.bin"), origin.url("y.bin")])
        try driver.unmount(mountpoint, cache: cache)  // nothing of x or y was read: no cache entry to serve

        origin.halt()
        let partly = try mount([other.url("z.bin")], expectStatus: 2)
        XCTAssertTrue(partly.stderr.contains("stays in this cache's list"), partly.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["z.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/z.bin"), good)
        XCTAssertEqual(try statusFiles().compactMap { $0["state"] as? String }.sorted(),
                       ["complete", "unmounted", "unmounted"])
        try driver.unmount(mountpoint, cache: cache)
        let saved = try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8)
        for name in ["x.bin", "y.bin", "z.bin"] { XCTAssertTrue(saved.contains(name), saved) }

        try origin.resume()
        try mount([])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(),
                       ["x.bin", "y.bin", "z.bin"])
        XCTAssertEqual(try driver.run(["rm", "x.bin", "--mount", mountpoint]).status, 0)
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["y.bin", "z.bin"])
    }

    // 2b. A damaged catalog.json is kept aside and reported, never silently emptied.
    func testADamagedSavedSetIsKeptAsideAndReported() throws {
        try origin.serveRandomFile("fresh.bin", size: 65536)
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        let damaged = "[{\"name\": \"lost.bin\", \"url\": \"http://127.0.0.1:1/lost.bin\"" // cut off
        try damaged.write(toFile: cache + "/catalog.json", atomically: false, encoding: .utf8)
        let result = try mount([origin.url("fresh.bin")])
        XCTAssertTrue(result.stderr.contains("catalog.json is damaged"), result.stderr)
        XCTAssertTrue(result.stderr.contains("kept it as"), result.stderr)
        let aside = try FileManager.default.contentsOfDirectory(atPath: cache).filter { $0.hasPrefix("catalog.json.damaged-") }
        XCTAssertEqual(aside.count, 1)
        let kept = try XCTUnwrap(aside.first)
        XCTAssertEqual(try String(contentsOfFile: cache + "/" + kept, encoding: .utf8), damaged)
    }

    // 3. `rangefs unmount` returns once the daemon has exited, so mounting the same cache at once always works.
    func testMountRightAfterUnmountSucceedsTwentyTimes() throws {
        let digest = try origin.serveRandomFile("again.bin", size: 4 << 20)
        for round in 1...20 {
            let result = try driver.mount(mountpoint, urls: [origin.url("again.bin")], cache: cache)
            XCTAssertEqual(result.status, 0, "round \(round): \(result.stderr)")
            guard result.status == 0 else { break }
            if round == 1 || round == 20 { XCTAssertEqual(try Shell.sha256(of: mountpoint + "/again.bin"), digest) }
            let unmounted = try driver.run(["unmount", mountpoint])
            XCTAssertEqual(unmounted.status, 0, unmounted.stderr)
            XCTAssertTrue(unmounted.stdout.contains("daemon committed the cache and exited"), unmounted.stdout)
        }
        // Nothing writes to the cache after the last unmount returned.
        XCTAssertNoThrow(try FileManager.default.removeItem(atPath: cache))
    }

    // 4. A hung origin (SIGSTOP) fails an uncached read with EIO within --timeout x --retries, not twice that.
    func testAReadOfAHungOriginFailsWithinTheRetryBound() throws {
        let hung = try NginxOrigin()
        defer { hung.thaw(); hung.stop() }
        try hung.serveRandomFile("stuck.bin", size: 8 << 20)
        try mount([hung.url("stuck.bin")], extra: ["--timeout", "3", "--retries", "2"])
        hung.freeze()
        let started = Date()
        XCTAssertEqual(readError(mountpoint + "/stuck.bin", offset: 4 << 20, count: 4096), EIO)
        let took = Date().timeIntervalSince(started)
        XCTAssertLessThan(took, 3 * 2 + 5, "EIO after \(took) s")
        hung.thaw()
    }

    // 4b. Issue 39: an origin that accepts connections and never answers (SIGSTOP) holds only its own files'
    //     checks. A read of a file on another, healthy origin that finds its file changed gets its ESTALE answer
    //     while the hung origin's check (`--revalidate 0`: every open checks) is still pending, and the
    //     change is handled by then: a new open sees the new version.
    func testAHungOriginHoldsNoCheckOfAFileOnAnotherOrigin() throws {
        let hung = try NginxOrigin()
        defer { hung.thaw(); hung.stop() }
        try hung.serveRandomFile("stuck.bin", size: 1 << 20)
        try origin.serveRandomFile("fresh.bin", size: 8 << 20)
        try mount([hung.url("stuck.bin"), origin.url("fresh.bin")], extra: ["--revalidate", "0", "--prefetch", "none"])
        let path = mountpoint + "/fresh.bin"
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(Glibc.pread(reader, &buffer, 4096, 0), 4096)

        hung.freeze()
        // This open checks the hung file against its server: the probe connects and never gets an answer.
        let stuck = open(mountpoint + "/stuck.bin", O_RDONLY)
        XCTAssertGreaterThanOrEqual(stuck, 0)
        close(stuck)
        let newDigest = try origin.serveRandomFile("fresh.bin", size: 9 << 20)  // new size and mtime: new ETag
        XCTAssertEqual(utimes(origin.path("fresh.bin"), [timeval(tv_sec: time(nil) + 3600, tv_usec: 0),
                                                          timeval(tv_sec: time(nil) + 3600, tv_usec: 0)]), 0)
        let started = Date()
        XCTAssertEqual(Glibc.pread(reader, &buffer, 4096, 5 << 20), -1)
        XCTAssertEqual(errno, ESTALE)
        let took = Date().timeIntervalSince(started)
        // Had it waited for the hung origin's check, it could only have answered once that check gave up: no byte
        // for `lowSpeedTime` (20 s) at the least. Half of that leaves a loaded machine room, and is no deadline
        // for the work itself (one READ answered from memory).
        XCTAssertLessThan(took, 10, "ESTALE after \(took) s: it waited for the hung origin's check")
        XCTAssertEqual(try statFile(path).st_size, off_t(9 << 20), "the change was handled before the answer")
        XCTAssertEqual(try Shell.sha256(of: path), newDigest)
    }

    // 5. Bad input names the real problem.
    func testAnUnsafeNameIsReportedAsTheNameNotTheURL() throws {
        try origin.serveRandomFile("named.bin", size: 4096)
        for name in ["../../etc/x", "a/b", ".."] {
            let result = try driver.mount(mountpoint, urls: ["\(name)=\(origin.url("named.bin"))"], cache: cache)
            XCTAssertEqual(result.status, 1)
            XCTAssertTrue(result.stderr.contains("the name '\(name)' cannot name a file"), result.stderr)
            XCTAssertFalse(result.stderr.contains("scheme"), result.stderr)
        }
    }

    func testARawSpaceInAURLGetsAHintToPercentEncodeIt() throws {
        try origin.serve("with space.bin", bytes: Array(repeating: 7, count: 4096))
        let result = try driver.mount(mountpoint, urls: [origin.url("with space.bin")], cache: cache)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("a raw space") && result.stderr.contains("%20"), result.stderr)
        try mount([origin.url("with%20space.bin")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["with space.bin"])
    }

    func testLongNamesAreShortenedWithinTheLimitWithAWarning() throws {
        try origin.serveRandomFile("long.bin", size: 4096)
        // Two-byte characters: 2,000 of them are 4,000 bytes; the two names share their first 255 bytes.
        let long = String(repeating: "é", count: 2000)
        let result = try mount(["\(long)a=\(origin.url("long.bin"))", "\(long)b=\(origin.url("long.bin?2"))"])
        XCTAssertTrue(result.stderr.contains("shortened"), result.stderr)
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint)
        XCTAssertEqual(names.count, 2)
        for name in names {
            XCTAssertLessThanOrEqual(name.utf8.count, 255, name)
            XCTAssertTrue(name.hasPrefix("éé"))
        }
        // Every name fits a local filesystem, so a recursive copy works.
        let copy = scratch.path + "/copy"
        let copied = try Shell.run("/bin/cp", ["-r", mountpoint, copy])
        XCTAssertEqual(copied.status, 0, copied.stderr)
    }

    // 6. -v logs one line per request, and never a password.
    func testVerboseLogsOneLinePerRequestWithoutThePassword() throws {
        let digest = try origin.serveRandomFile("logged.bin", size: 4 << 20)
        let log = scratch.path + "/rangefs.log"
        let url = origin.url("logged.bin").replacingOccurrences(of: "http://", with: "http://reader:s3cret@")
        origin.clearAccessLog()
        // Until the mount is ready its log goes to the mounting command's stderr (the probe's line), then to the file.
        let mounted = try mount([url], extra: ["-v", "--log-file", log])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/logged.bin"), digest)
        try driver.unmount(mountpoint, cache: cache)
        let text = mounted.stderr + (try String(contentsOfFile: log, encoding: .utf8))
        XCTAssertFalse(text.contains("s3cret"), text)
        let lines = text.split(separator: "\n").filter { $0.contains("GET bytes=") }
        let requests = origin.accessLog().filter { $0.path == "/logged.bin" }
        XCTAssertEqual(lines.count, requests.count, "one line per request:\n\(text)")
        for line in lines {
            XCTAssertTrue(line.contains(" http://127.0.0.1:"), String(line))
            XCTAssertTrue(line.contains(" bytes in ") && line.contains(" s "), String(line))
        }
    }
}
