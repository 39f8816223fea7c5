import Foundation
import Glibc
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 35, case 8: failures say so. A directory URL whose answer is no listing, a full cache disk, a server that
/// wants a login, and a mount whose daemon was killed: each is one clear line and an exit status that says it.
final class FailureReportTests: MountTestCase {
    /// A server whose directory URLs answer 2 MiB of random bytes (seed 6 of Python's `random`, which holds
    /// `<a ` as a real page would: about half of all such bodies do): `/html/` as text/html and `/octet/` as
    /// application/octet-stream.
    func startBlobServer() throws -> (BackgroundProcess, Int, TemporaryDirectory) {
        let folder = try TemporaryDirectory(prefix: "blob")
        let script = folder.path + "/blob.py"
        try """
        import http.server, random, sys
        body = random.Random(6).randbytes(2 << 20)
        assert b"<a " in body
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            def do_GET(self):
                kinds = {"/html/": "text/html", "/octet/": "application/octet-stream"}
                if self.path not in kinds:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kinds[self.path])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *arguments):
                pass
        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128
        Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
        """.write(toFile: script, atomically: false, encoding: .utf8)
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port)], logPath: folder.path + "/out.log")
        }
        return (server, port, folder)
    }

    func testADirectoryURLAnsweredWithBytesThatAreNoListingFailsWithOneLine() throws {
        let (server, port, _) = try startBlobServer()
        defer { server.stop() }
        let html = "http://127.0.0.1:\(port)/html/"
        let octet = "http://127.0.0.1:\(port)/octet/"

        let alone = try driver.mount(mountpoint, urls: [html], cache: cache)
        XCTAssertEqual(alone.status, 1, alone.stderr)
        XCTAssertFalse(driver.isMounted(mountpoint))
        let lines = problemLines(alone.stderr)
        XCTAssertEqual(lines.count, 1, "one line: \(alone.stderr)")
        XCTAssertTrue(lines.first?.contains(html) == true && lines.first?.contains("not a directory listing") == true,
                      alone.stderr)

        let expected = try origin.serveRandomFile("good.bin", size: 1 << 20)
        let beside = try driver.mount(mountpoint, urls: [octet, origin.url("good.bin")], cache: cache)
        XCTAssertEqual(beside.status, 2, "some URLs failed: \(beside.stderr)")
        let besideLines = problemLines(beside.stderr)
        XCTAssertEqual(besideLines.count, 1, beside.stderr)
        XCTAssertTrue(besideLines.first?.contains(octet) == true
                      && besideLines.first?.contains("not a directory listing") == true, beside.stderr)
        XCTAssertTrue(driver.isMounted(mountpoint))
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/good.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)

        // An empty folder's listing (nginx autoindex) is a listing: it mounts, empty, and says nothing.
        try FileManager.default.createDirectory(atPath: origin.path("listed/nothing-here"),
                                                withIntermediateDirectories: true)
        let empty = try driver.mount(mountpoint, urls: [origin.url("listed/nothing-here/")], cache: cache + "2")
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual(problemLines(empty.stderr), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), [])
        try driver.unmount(mountpoint, cache: cache + "2")
    }

    func testA401Or403NamesTheWaysToLogIn() throws {
        var extras = NginxOrigin.Extras()
        extras.locations = { _, prefix in
            """
            location /private/ { auth_basic "rangefs"; auth_basic_user_file \(prefix)/htpasswd; }
            location /forbidden/ { deny all; }
            """
        }
        let guarded = try NginxOrigin(extras)
        defer { guarded.stop() }
        try "alice:{PLAIN}s3cret\n".write(toFile: guarded.root + "/../htpasswd", atomically: false, encoding: .utf8)
        for folder in ["private", "forbidden"] {
            try FileManager.default.createDirectory(atPath: guarded.path(folder), withIntermediateDirectories: true)
        }
        let expected = try guarded.serveRandomFile("private/a.bin", size: 1 << 20)
        try guarded.serveRandomFile("forbidden/b.bin", size: 1 << 20)

        let refused = try driver.mount(mountpoint, urls: [guarded.url("private/a.bin"), guarded.url("forbidden/b.bin")],
                                       cache: cache)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        let lines = problemLines(refused.stderr)
        XCTAssertEqual(lines.count, 2, refused.stderr)
        for (status, url) in [(401, guarded.url("private/a.bin")), (403, guarded.url("forbidden/b.bin"))] {
            let line = try XCTUnwrap(lines.first { $0.contains(url) }, refused.stderr)
            XCTAssertTrue(line.contains("HTTP \(status)"), line)
            for way in ["user:password@", "--netrc", "--header"] {
                XCTAssertTrue(line.contains(way), "the line names \(way): \(line)")
            }
        }

        // One of the ways named works.
        let login = "http://alice:s3cret@127.0.0.1:\(guarded.port)/private/a.bin"
        try mount([login])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), expected)
    }

    func testStatusOfAKilledMountSaysItIsDeadAndHowToClearIt() throws {
        try origin.serveRandomFile("dead.bin", size: 1 << 20)
        try mount([origin.url("dead.bin")])
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        try driver.waitForUnlock(cache)  // the kernel dropped its lock: it is gone
        XCTAssertTrue(driver.isMounted(mountpoint), "the dead mount stays until it is cleared")

        for arguments in [["status", "--mount", mountpoint], ["status", mountpoint]] {
            let status = try driver.run(arguments)
            XCTAssertNotEqual(status.status, 0, status.stdout)
            XCTAssertTrue(status.stderr.contains("the mount at \(mountpoint) is dead"), status.stderr)
            XCTAssertTrue(status.stderr.contains("fusermount3 -uz \(mountpoint)"), status.stderr)
            XCTAssertEqual(status.stderr.split(separator: "\n").count, 1, status.stderr)
        }
        // The command it names clears it.
        XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)
        XCTAssertFalse(driver.isMounted(mountpoint))
    }

    /// A daemon that is alive but stopped (SIGSTOP), asked about from a session whose socket folder holds no socket
    /// of it (another `XDG_RUNTIME_DIR`): `status --mount M` says within seconds that M does not answer (a stat
    /// of a FUSE mount waits for its daemon, so it is asked on a thread with a limit), and a bare `status` stats
    /// no mount it has no refused socket for. Before, both waited for ever in statvfs.
    func testStatusOfAStoppedMountWhoseSocketIsNotFoundSaysItDoesNotAnswer() throws {
        try origin.serveRandomFile("stopped.bin", size: 1 << 20)
        try mount([origin.url("stopped.bin")])
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        XCTAssertEqual(kill(pid, SIGSTOP), 0)
        var resumed = false
        defer { if !resumed { kill(pid, SIGCONT) } }
        let elsewhere = scratch.path + "/runtime"
        XCTAssertEqual(mkdir(elsewhere, 0o700), 0)
        let expected = [["status", "--mount", mountpoint]: "the mount at \(mountpoint) does not answer",
                        ["status"]: "no running rangefs mount found"]
        for (arguments, message) in expected {
            let started = Date()
            let result = try Shell.run("/usr/bin/env", ["XDG_RUNTIME_DIR=" + elsewhere, driver.binary] + arguments,
                                       timeout: 60)
            XCTAssertLessThan(Date().timeIntervalSince(started), 20, "\(arguments) gave up in time")
            XCTAssertNotEqual(result.status, 0, result.stdout)
            XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
        }
        XCTAssertEqual(kill(pid, SIGCONT), 0)
        resumed = true
        let status = try driver.run(["status", "--mount", mountpoint, "--timeout", "20"])
        XCTAssertEqual(status.status, 0, "it answers again once resumed: \(status.stderr)")
    }
}

extension FailureReportTests {
    /// `value` bytes as `rangefs` prints them (StatusTable.bytes).
    func shown(_ value: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var amount = Double(value), unit = 0
        while amount >= 1024 && unit < units.count - 1 { amount /= 1024; unit += 1 }
        return unit == 0 ? "\(value) B" : String(format: "%.1f %@", amount, units[unit])
    }

    func testAFullCacheDiskLogsOnceShowsInStatusAndUnmountSaysWhatWasKept() throws {
        let server = try NginxOrigin()  // its own: it is halted below
        defer { server.stop() }
        let size = 64 << 20
        try server.serveRandomFile("big.bin", size: size)
        let original = try XCTUnwrap(FileManager.default.contents(atPath: server.path("big.bin")))
        // The cache on a 16 MiB tmpfs: a quarter of the file.
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        let tmpfs = try Shell.run("/bin/mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", cache])
        XCTAssertEqual(tmpfs.status, 0, tmpfs.stderr)
        defer {
            driver.unmountAll()
            try? driver.waitForUnlock(cache)
            // Lazily if a failing test left it busy: no tmpfs stays behind.
            if (try? Shell.run("/bin/umount", [cache]).status) != 0 { _ = try? Shell.run("/bin/umount", ["-l", cache]) }
        }
        let log = scratch.path + "/rangefs.log"  // not on the full disk
        try mount([server.url("big.bin")], extra: ["--log-file", log])
        let file = mountpoint + "/big.bin"
        XCTAssertEqual(try Shell.sha256(of: file), Shell.sha256(of: original),
                       "what cannot be cached is served from memory")

        // Until `status` shows the writes that failed. Commits go on working (cache format v2): a commit writes its
        // slot in place, in space the entry holds since it was created, so what was written is kept.
        var status = ""
        let deadline = Date().addingTimeInterval(120)
        repeat {
            status = try driver.run(["status", "--mount", mountpoint]).stdout
            if status.contains("cannot write fetched blocks") { break }
            usleep(200_000)
        } while Date() < deadline
        XCTAssertTrue(status.contains("warning: cannot write fetched blocks to the cache"), status)
        XCTAssertTrue(status.contains("the cache disk is full"), status)
        XCTAssertFalse(status.contains("cache commits are failing"), status)
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        let writeLines = logText.split(separator: "\n").filter { $0.contains("serving fetched blocks from memory") }
        XCTAssertEqual(writeLines.count, 1, "one line when writes start failing: \(logText)")

        let unmounted = try driver.run(["unmount", mountpoint])
        XCTAssertNotEqual(unmounted.status, 0, unmounted.stdout)
        XCTAssertFalse(unmounted.stdout.contains("committed"), unmounted.stdout)
        try driver.waitForUnlock(cache)
        XCTAssertFalse(driver.isMounted(mountpoint))

        // What is marked present on disk is what the unmount said it kept, and every byte of it is right.
        let files = try XCTUnwrap(EntryFiles.all(root: cache).first)
        guard case .entry(let loaded) = files.load() else { return XCTFail("the entry \(files.base) is unreadable") }
        let header = loaded.meta.header
        let present = try XCTUnwrap(loaded.meta.slot, "commits worked").present
        let kept = UInt64(present.setCount * header.blockSize)
        XCTAssertGreaterThan(kept, 0)
        XCTAssertLessThan(kept, UInt64(size))
        XCTAssertTrue(unmounted.stderr.contains("its cache did not keep everything: \(shown(kept)) of the "),
                      "says how much was kept (\(shown(kept))): \(unmounted.stderr)")
        XCTAssertEqual(unmounted.stderr.split(separator: "\n").count, 1, unmounted.stderr)

        // Remounted with room, and the origin down: the kept blocks are served from the cache, right.
        XCTAssertEqual(try Shell.run("/bin/mount", ["-o", "remount,size=128m", cache]).status, 0)
        server.halt()
        let again = try driver.mount(mountpoint, urls: [server.url("big.bin")], cache: cache)
        XCTAssertEqual(again.status, 0, again.stderr)
        let cached = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", file])
        XCTAssertEqual(UInt64(cached.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), kept)
        for index in 0..<header.blockCount where present.contains(index) {
            let offset = index * header.blockSize
            XCTAssertEqual(try pread(file, offset: offset, count: header.blockSize),
                           [UInt8](original[offset..<(offset + header.blockSize)]), "block \(index)")
        }
        try driver.unmount(mountpoint, cache: cache)
    }
}
