import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 24: a library of 10,000 URLs under the common limit of 1,024 open files, with the default options.
final class LibraryScaleTests: MountTestCase {
    /// Writes `count` files of 1 to 4 KB under the origin's `library/` folder; returns their bytes by name.
    func makeLibrary(count: Int) throws -> [String: Data] {
        let folder = origin.root + "/library"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var files: [String: Data] = [:]
        for index in 0..<count {
            let name = String(format: "f%05d.bin", index)
            let bytes = Data(pseudoRandomBytes(count: 1000 + index * 7919 % 3000, seed: UInt64(index) + 1))
            try bytes.write(to: URL(fileURLWithPath: folder + "/" + name))
            files[name] = bytes
        }
        return files
    }

    /// The daemon's resident memory in KiB and its open descriptors.
    func daemonUsage(_ pid: pid_t) throws -> (rssKiB: Int, descriptors: Int) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        return (rss, descriptors)
    }

    // 1. and 2. `ls -l` and a read of every file give the origin's bytes with no error while the daemon may open
    //    1,024 files; then status answers within 5 s and the daemon stays under 120 MiB. With 2,000 of the files
    //    held open at once by one reader, every read is right.
    func testTenThousandURLsUnderALimitOfAThousandOpenFiles() throws {
        let files = try makeLibrary(count: 10_000)
        let names = files.keys.sorted()
        let list = scratch.path + "/library.list"
        try names.map { origin.url("library/" + $0) }.joined(separator: "\n").write(toFile: list, atomically: true,
                                                                                    encoding: .utf8)
        let mounted = try driver.mount(mountpoint, urls: [], cache: cache, extra: ["--list", list],
                                       openFileLimit: 1024)
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertTrue(driver.isMounted(mountpoint), mounted.stderr)
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        XCTAssertTrue(limits.split(separator: "\n").contains {
            $0.hasPrefix("Max open files") && $0.split(separator: " ").filter { $0 == "1024" }.count == 2
        }, "the daemon runs under 1024 open files, soft and hard")

        let listed = try Shell.run("/bin/ls", ["-l", mountpoint])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(listed.stdout.split(separator: "\n").count, 10_001, "a total line and 10,000 files")

        var failures: [String] = []
        for name in names {
            guard let read = FileManager.default.contents(atPath: mountpoint + "/" + name) else {
                failures.append("\(name): \(String(cString: strerror(errno)))")
                continue
            }
            if read != files[name] { failures.append("\(name): wrong bytes") }
        }
        XCTAssertEqual(failures.count, 0, "failed reads: \(failures.prefix(5))")
        let usage = try daemonUsage(pid)
        XCTAssertLessThan(usage.descriptors, 1024, "the daemon stayed within its limit")

        let started = Date()
        let status = try driver.run(["status", mountpoint], timeout: 30)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertLessThan(elapsed, 5, "status of 10,000 files answers within 5 s")
        XCTAssertTrue(status.stdout.contains("total: 10000 files"), status.stdout.suffix(300).description)
        XCTAssertLessThanOrEqual(try daemonUsage(pid).rssKiB, 120 << 10, "the daemon's RSS stays within 120 MiB")

        // 2,000 of them open at once in one reader (a process of its own, allowed 4,096 open files).
        let reader = """
        import os, sys
        mount, origin, names = sys.argv[1], sys.argv[2], sys.argv[3:]
        handles = [open(os.path.join(mount, name), 'rb') for name in names]
        bad = [name for name, handle in zip(names, handles)
               if handle.read() != open(os.path.join(origin, name), 'rb').read()]
        print(len(handles), 'open,', len(bad), 'wrong', bad[:5])
        sys.exit(1 if bad else 0)
        """
        let held = Array(names.reversed().prefix(2000))
        let result = try Shell.run("/usr/bin/prlimit", ["--nofile=4096:4096", "/usr/bin/python3", "-c", reader,
                                                        mountpoint, origin.root + "/library"] + held, timeout: 300)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("2000 open, 0 wrong"), result.stdout + result.stderr)
        XCTAssertLessThan(try daemonUsage(pid).descriptors, 1024)
    }

    /// Writes an HTML page of links as `folder/index.html` under the origin (nginx serves it as the folder's
    /// listing): `live` files that exist, of 100 + n bytes, and `dead` links that answer 404.
    func makePage(_ folder: String, live: Int, dead: Int) throws {
        let path = origin.root + "/" + folder
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var page = "<html><body><h1>Index</h1>\n"
        for index in 0..<max(live, dead) {
            if index < live {
                try Data(repeating: UInt8(index % 251), count: 100 + index).write(to: URL(fileURLWithPath: path + "/live\(index).bin"))
                page += "<a href=\"live\(index).bin\">live \(index)</a>\n"
            }
            if index < dead { page += "<a href=\"dead\(index).bin\">dead \(index)</a>\n" }
        }
        try (page + "</body></html>\n").write(toFile: path + "/index.html", atomically: false, encoding: .utf8)
    }

    /// Checks that `ls` reported nothing but dead links of a page, at most `dead` of them, as it reports a name
    /// that went away between reading the directory and `stat`: a names-only directory read sends no request
    /// (issue 35), so dead links are found by the lookups of `ls -l` itself. How many are reported depends on how
    /// far the directory read had come when a lookup's batch of probes found them.
    func assertOnlyDeadLinksReported(_ listed: ProcessResult, dead: Int, line: UInt = #line) {
        let reported = listed.stderr.split(separator: "\n")
        XCTAssertEqual(listed.status, reported.isEmpty ? 0 : 1, listed.stderr.suffix(300).description, line: line)
        XCTAssertLessThanOrEqual(reported.count, dead, line: line)
        XCTAssertTrue(reported.allSatisfy { $0.contains("cannot access") && $0.contains("/dead")
                && $0.hasSuffix(": No such file or directory") }, reported.prefix(3).description, line: line)
    }

    // 3. A page of 100 files and 2,000 dead links: `ls -l` costs at most one request per link and reports no more
    //    than dead links, which leave the directory, and a second `ls -l` costs nothing. A hostile page of 20,014
    //    links costs at most one request per link for `ls -lR`.
    func testDeadLinksAreProbedOnceAndLeaveTheDirectory() throws {
        try makePage("dead", live: 100, dead: 2000)
        try mount([origin.url("dead/")], extra: Self.steadyListings)  // counted: no re-listing midway
        origin.clearAccessLog()
        let first = try Shell.run("/bin/ls", ["-l", mountpoint])
        assertOnlyDeadLinksReported(first, dead: 2000)
        let log = origin.accessLog().filter { $0.path.hasPrefix("/dead/") }
        XCTAssertLessThanOrEqual(log.count, 1 + 2100, "at most one request per link, and the listing")
        XCTAssertEqual(Set(log.map(\.path)).count, log.count, "no link asked for twice")
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted()
        XCTAssertEqual(names, (0..<100).map { "live\($0).bin" }.sorted(), "the dead links left the directory")
        for index in [0, 57, 99] {
            XCTAssertEqual(try statFile(mountpoint + "/live\(index).bin").st_size, off_t(100 + index))
        }
        origin.clearAccessLog()
        XCTAssertEqual(try Shell.run("/bin/ls", ["-l", mountpoint]).status, 0)
        XCTAssertEqual(origin.accessLog().filter { $0.path.hasPrefix("/dead/") }.count, 0, "a second ls -l costs nothing")
    }

    func testAHostilePageOfTwentyThousandLinksCostsOneRequestPerLink() throws {
        try makePage("hostile20k", live: 14, dead: 20_000)
        try mount([origin.url("hostile20k/")], extra: Self.steadyListings)  // counted: no re-listing midway
        origin.clearAccessLog()
        let listed = try Shell.run("/bin/ls", ["-lR", mountpoint], timeout: 300)
        assertOnlyDeadLinksReported(listed, dead: 20_000)
        let log = origin.accessLog().filter { $0.path.hasPrefix("/hostile20k/") }
        XCTAssertLessThanOrEqual(log.count, 20_015, "at most one request per link, and the listing")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).count, 14)
    }

    // 4. While one directory's listing stalls, another directory lists, a file elsewhere stats and a cached file
    //    reads. No clock decides it: the stalled listing is held until the test ends (the server answers it only
    //    then), so each of the three finishing while the `ls` of the stalled directory still waits shows that none
    //    of them waited for it. Had one waited, it could only have ended with that `ls`, at the listing's deadline.
    func testAStalledListingDelaysNothingElse() throws {
        let asked = origin.root + "/stalled-listing-asked"
        let server = """
        import http.server, os, sys, threading
        release = threading.Event()  # never set: the stalled listing is answered only when the server stops
        class Slow(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def do_GET(self):
                # The directory lists at once (at mount); its subdirectory stalls when first visited.
                if self.path == '/stalled/':
                    body = b'<a href="inner/">inner/</a>\\n'
                else:
                    open(sys.argv[2], 'w').close()  # the stalled listing is under way
                    release.wait()
                    body = b''
                self.send_response(200)
                self.send_header('Content-Type', 'text/html')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *args):
                pass
        http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Slow).serve_forever()
        """
        let (slow, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", ["-c", server, String(port), asked])
        }
        defer { slow.stop() }
        let tree = origin.root + "/fast"
        try FileManager.default.createDirectory(atPath: tree + "/sub", withIntermediateDirectories: true)
        for index in 0..<50 { try Data(count: 1000 + index).write(to: URL(fileURLWithPath: tree + "/sub/f\(index).bin")) }
        let cached = try origin.serveRandomFile("cached.bin", size: 1 << 20)
        try mount(["http://127.0.0.1:\(port)/stalled/", origin.url("fast/"), origin.url("cached.bin")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/cached.bin"), cached)

        let stalled = try BackgroundProcess("/bin/ls", ["-l", mountpoint + "/stalled/inner"])
        defer { _ = stalled.stop(signal: SIGKILL) }
        // Until the server holds the stalled listing's request (not a timer: the file it makes when asked).
        let reached = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: asked) && stalled.isRunning && Date() < reached {
            usleep(10_000)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: asked), "the stalled directory was never asked for")
        func unheld(_ what: String, _ body: () throws -> Void) rethrows {
            try body()
            XCTAssertTrue(stalled.isRunning, "\(what) ended after the stalled listing: it waited for it")
        }
        try unheld("ls -l of another directory") {
            let listed = try Shell.run("/bin/ls", ["-l", mountpoint + "/fast/sub"], timeout: 300)
            XCTAssertEqual(listed.status, 0, listed.stderr)
            XCTAssertEqual(listed.stdout.split(separator: "\n").count, 51)
        }
        try unheld("stat of a file elsewhere") {
            XCTAssertEqual(try statFile(mountpoint + "/fast/sub/f7.bin").st_size, 1007)
        }
        try unheld("cat of a cached file") {
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/cached.bin"), cached)
        }
    }

    // 5. A directory of 100,000 files, as nginx's JSON and as its HTML: `ls -l` shows all of them with the origin's
    //    sizes and sends one request for the directory. The HTML's dates are to the minute, and a file's date stays
    //    what the listing said after an open probed it (a second `rsync -a` copies nothing).
    func testAHundredThousandFilesListWholeWithOneRequestEach() throws {
        let folder = origin.root + "/big"
        let made = try Shell.run("/usr/bin/python3", ["-c", """
            import os, sys
            folder = sys.argv[1]
            os.makedirs(folder, exist_ok=True)
            for index in range(100000):
                with open(os.path.join(folder, 'f%06d.bin' % index), 'wb') as f:
                    f.write(b'x' * (index % 4000))
            """, folder], timeout: 300)
        XCTAssertEqual(made.status, 0, made.stderr)
        origin.clearAccessLog()
        // Each listed once, at mount; counted, so no re-listing midway (two `ls -l` of 100,000 files can take a
        // minute on a loaded machine).
        try mount([origin.url("big-json/"), origin.url("big/")], extra: Self.steadyListings)
        for directory in ["big-json", "big"] {
            let listed = try Shell.run("/bin/ls", ["-l", mountpoint + "/" + directory], timeout: 300)
            XCTAssertEqual(listed.status, 0, listed.stderr)
            var sizes: [String: Int] = [:]
            for line in listed.stdout.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 9, let size = Int(fields[4]) else { continue }
                sizes[String(fields[8])] = size
            }
            XCTAssertEqual(sizes.count, 100_000, "\(directory): every file shown")
            let wrong = (0..<100_000).filter { sizes[String(format: "f%06d.bin", $0)] != $0 % 4000 }
            XCTAssertEqual(wrong.count, 0, "\(directory): sizes of \(wrong.prefix(5))")
            let requests = origin.accessLog().filter { $0.path.hasPrefix("/\(directory)/") }
            XCTAssertEqual(requests.count, 1, "\(directory): one request for the directory, no probe")
        }
        // Dates: exact from JSON, to the minute from HTML, and stable through the probe of an open.
        var info = stat()
        XCTAssertEqual(stat(folder + "/f000123.bin", &info), 0)
        let modified = Int(info.st_mtim.tv_sec)
        XCTAssertEqual(Int(try statFile(mountpoint + "/big-json/f000123.bin").st_mtim.tv_sec), modified)
        let shown = Int(try statFile(mountpoint + "/big/f000123.bin").st_mtim.tv_sec)
        XCTAssertEqual(shown, modified / 60 * 60)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: mountpoint + "/big/f000123.bin")).count, 123)
        XCTAssertEqual(Int(try statFile(mountpoint + "/big/f000123.bin").st_mtim.tv_sec), shown,
                       "the date stays the listing's after the open's probe")
    }
}
