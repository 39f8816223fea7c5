import Foundation
import Glibc
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Issue 36, trees walked ahead: when a reader reads a directory, the subdirectories it names are listed in the
/// background (DirectoryService+WalkAhead.swift), bounded, readers first. Counted from the servers' own logs: a
/// Python origin that notes each request as it arrives and holds the listings a test names until it is released,
/// and nginx for the bound.
final class WalkAheadTests: MountTestCase {
    /// A JSON listing origin (nginx's `autoindex_format json`) of a tree given in `config.json` beside the script:
    /// `tree` maps each directory path to its names (a directory's ends in `/`; a file has 1,000 bytes), `hold`
    /// names the paths whose answer (after its first byte, `[`) waits until the file `release` exists, and `fail`
    /// those that answer 500 until the file `mended` exists. Each request is noted in `arrivals.log` as it arrives,
    /// before any hold.
    static let script = """
    import http.server, json, os, sys, threading, time
    folder = os.path.dirname(os.path.abspath(sys.argv[0]))
    config = json.load(open(os.path.join(folder, "config.json")))
    noting = threading.Lock()
    MTIME = "Wed, 25 Nov 2026 12:00:00 GMT"
    PADDING = 240 << 10
    def note(line):
        with noting, open(os.path.join(folder, "arrivals.log"), "a") as log:
            log.write(line + "\\n")
    def exists(name):
        return os.path.exists(os.path.join(folder, name))
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            note(self.path)
            if self.path in config["fail"] and not exists("mended"):
                status, body, kind = 500, b"broken\\n", "text/plain"
            elif self.path in config["tree"]:
                entries = []
                for name in config["tree"][self.path]:
                    if name.endswith("/"):
                        entries.append({"name": name[:-1], "type": "directory", "mtime": MTIME})
                    else:
                        entries.append({"name": name, "type": "file", "mtime": MTIME, "size": 1000})
                status, body, kind = 200, json.dumps(entries).encode(), "application/json"
            else:
                status, body, kind = 404, b"", "text/plain"
            held = self.path in config["hold"] and body.startswith(b"[")
            padding = PADDING if held else 0
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body) + padding))
            self.end_headers()
            if held:
                # Held, yet never idle long enough for the client's low-speed timeout: JSON whitespace trickles
                # (4 KiB/s, for a minute at most) until the release.
                self.wfile.write(b"[")
                self.wfile.flush()
                while not exists("release") and padding > 1024:
                    self.wfile.write(b" " * 1024)
                    self.wfile.flush()
                    padding -= 1024
                    time.sleep(0.25)
                body = b" " * padding + body[1:]
            self.wfile.write(body)
        def log_message(self, *arguments):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True
    Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
    """

    /// The Python origin, started for one test.
    struct HoldingOrigin {
        let server: BackgroundProcess
        let port: Int
        let folder: TemporaryDirectory

        func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

        /// The paths requested so far, in the order they arrived.
        var arrivals: [String] {
            ((try? String(contentsOfFile: folder.path + "/arrivals.log", encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }

        /// Lets every held answer go.
        func release() { _ = FileManager.default.createFile(atPath: folder.path + "/release", contents: nil) }

        /// Makes the failing paths answer.
        func mend() { _ = FileManager.default.createFile(atPath: folder.path + "/mended", contents: nil) }

        func stop() {
            release()
            server.stop()
        }
    }

    func startOrigin(tree: [String: [String]], hold: [String] = [], fail: [String] = []) throws -> HoldingOrigin {
        let folder = try TemporaryDirectory(prefix: "walkahead")
        try Self.script.write(toFile: folder.path + "/origin.py", atomically: false, encoding: .utf8)
        let config: [String: Any] = ["tree": tree, "hold": hold, "fail": fail]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: folder.path + "/config.json"))
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [folder.path + "/origin.py", String(port)],
                                  logPath: folder.path + "/out.log")
        }
        return HoldingOrigin(server: server, port: port, folder: folder)
    }

    /// Polls `condition` up to `seconds` (generous: a loaded machine); whether it came true.
    func eventually(_ seconds: Double = 30, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// A tree of 21 directories: /tree/ holds d0-d3, each of those e0-e3, and every directory two files.
    static func twentyOneDirectories() -> [String: [String]] {
        var tree: [String: [String]] = ["/tree/": ["d0/", "d1/", "d2/", "d3/", "a.bin", "b.bin"]]
        for d in 0..<4 {
            tree["/tree/d\(d)/"] = (0..<4).map { "e\($0)/" } + ["a.bin", "b.bin"]
            for e in 0..<4 { tree["/tree/d\(d)/e\(e)/"] = ["a.bin", "b.bin"] }
        }
        return tree
    }

    // (a) `ls -lR` walks ahead: while the server holds the listing of d0, the first directory `ls -R` enters, d1-d3
    //     and their 12 subdirectories are requested all the same: the listings overlap the reader instead of
    //     following it one by one. Each directory is still listed once. On 2cbae5a nothing but the root and d0 is
    //     requested while d0 is held (`ls` waits for d0, and nothing lists ahead): the poll fails.
    func testLsLROfATreeListsItsSubdirectoriesAhead() throws {
        let tree = Self.twentyOneDirectories()
        let origin = try startOrigin(tree: tree, hold: ["/tree/d0/"])
        defer { origin.stop() }
        try mount([origin.url("/tree/")])
        let output = scratch.path + "/ls.out"
        let reader = try BackgroundProcess("/bin/ls", ["-lR", mountpoint], logPath: output)
        defer { reader.stop() }
        let ahead = Set(tree.keys.filter { !$0.hasPrefix("/tree/d0/") && $0 != "/tree/" })
        XCTAssertEqual(ahead.count, 15)
        let overlapped = eventually { origin.arrivals.contains("/tree/d0/") && ahead.isSubset(of: origin.arrivals) }
        XCTAssertTrue(overlapped, "while d0 is held, requested only: \(origin.arrivals)")
        XCTAssertTrue(reader.isRunning, "ls -lR waits for d0, whose listing the server holds")
        origin.release()
        XCTAssertEqual(reader.waitForExit(timeout: 60), 0, "ls -lR ends once d0 is answered")
        let listed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        for directory in tree.keys where directory != "/tree/" {
            XCTAssertTrue(listed.contains(mountpoint + String(directory.dropFirst(5).dropLast()) + ":"), directory)
        }
        XCTAssertEqual(listed.components(separatedBy: "a.bin").count - 1, 21, listed)
        let arrivals = origin.arrivals
        XCTAssertEqual(arrivals.count, 21, "each directory listed once: \(arrivals)")
        XCTAssertEqual(Set(arrivals), Set(tree.keys))
    }

    // (b) The bound: `ls` of a root of 100 subdirectories, each with 2 of its own, lists 32 of them ahead
    //     (`walkAheadDirectories`), none of the 200 below, and the mount alone lists none ahead. Counted from
    //     nginx's access log. On 2cbae5a none is listed ahead: the poll fails.
    func testLsOfAWideRootListsAtMostTheBoundAhead() throws {
        let root = origin.path("fast/wide")
        try? FileManager.default.removeItem(atPath: root)
        for s in 0..<100 {
            for t in 0..<2 {
                try FileManager.default.createDirectory(atPath: root + String(format: "/s%03d/t%d", s, t),
                                                        withIntermediateDirectories: true)
            }
            try Data(count: 100).write(to: URL(fileURLWithPath: root + String(format: "/s%03d/f.bin", s)))
        }
        origin.clearAccessLog()
        try mount([origin.url("fast/wide/")])
        func listingsBelow() -> [String] {
            origin.accessLog().map(\.path).filter { $0.hasPrefix("/fast/wide/") && $0 != "/fast/wide/" }
        }
        XCTAssertEqual(listingsBelow(), [], "mounting lists nothing ahead")
        XCTAssertEqual(try Shell.run("/bin/ls", [mountpoint]).status, 0)
        let bound = DirectoryService.walkAheadDirectories
        XCTAssertTrue(eventually { listingsBelow().count >= bound }, "listed ahead: \(listingsBelow())")
        // Nothing to poll for when nothing more should come: give a walk that overshot the time to show it.
        sleep(2)
        let below = listingsBelow()
        XCTAssertEqual(below.count, bound, "\(below)")
        XCTAssertEqual(Set(below).count, below.count, "none twice")
        XCTAssertEqual(below.filter { $0.contains("/t") }, [], "nothing two levels down from one ls of the root")
        XCTAssertEqual(below.sorted(), (0..<bound).map { String(format: "/fast/wide/s%03d/", $0) },
                       "the first subdirectories in name order, which the reader reaches first")
    }

    // (c) Readers first: with the server holding every listing ahead in flight (12 of the 16 connections per host),
    //     a reader's `ls` of a directory still queued to be listed ahead answers at once, and a reader of a
    //     directory being listed ahead joins that listing (one request). On 2cbae5a nothing is listed ahead, so
    //     the first poll (8 held listings in flight) fails.
    func testAReaderIsNotQueuedBehindListingsAheadStuckOnASlowServer() throws {
        let held = (0..<16).map { String(format: "held-%02d/", $0) }
        var tree: [String: [String]] = ["/tree/": held + ["zz-open/"], "/tree/zz-open/": ["inside.bin"]]
        for name in held { tree["/tree/" + name] = ["x.bin"] }
        let origin = try startOrigin(tree: tree, hold: held.map { "/tree/" + $0 })
        defer { origin.stop() }
        try mount([origin.url("/tree/")])
        XCTAssertEqual(try Shell.run("/bin/ls", [mountpoint]).status, 0)
        let inFlight = 12  // three quarters of the 16 connections per host
        XCTAssertTrue(eventually { origin.arrivals.filter { $0.contains("held-") }.count >= inFlight },
                      "listings ahead in flight: \(origin.arrivals)")
        let open = try Shell.run("/bin/ls", ["-l", mountpoint + "/zz-open"], timeout: 60)
        XCTAssertEqual(open.status, 0, open.stderr)
        XCTAssertTrue(open.stdout.contains("inside.bin"), open.stdout)
        XCTAssertEqual(origin.arrivals.filter { $0.contains("held-") }.count, inFlight,
                       "the walk keeps to its bound while its listings are held: \(origin.arrivals)")
        // A reader of a directory listed ahead right now joins that listing (or, on a machine slow to start it,
        // finds it done): one request either way.
        let first = try XCTUnwrap(origin.arrivals.first { $0.contains("held-") })
        let joined = scratch.path + "/joined.out"
        let reader = try BackgroundProcess("/bin/ls", [mountpoint + String(first.dropFirst(5))], logPath: joined)
        defer { reader.stop() }
        origin.release()
        XCTAssertEqual(reader.waitForExit(timeout: 60), 0)
        XCTAssertEqual((try? String(contentsOfFile: joined, encoding: .utf8)) ?? "", "x.bin\n")
        XCTAssertTrue(eventually { Set(origin.arrivals).count == tree.count }, "the walk ends: \(origin.arrivals)")
        XCTAssertEqual(origin.arrivals.filter { $0 == first }.count, 1, "the reader joined the listing ahead")
    }

    // A listing ahead that fails leaves no error behind: the reader's own listing of that directory tries again
    // and shows it, where a failed reader listing fails reads with EIO for 10 s. On 2cbae5a nothing is listed
    // ahead: the poll for the failed listing ahead fails.
    func testAListingAheadThatFailedDoesNotMakeItsDirectoryUnreadable() throws {
        let tree: [String: [String]] = ["/tree/": ["flaky/", "a.bin"], "/tree/flaky/": ["in.bin"]]
        let origin = try startOrigin(tree: tree, fail: ["/tree/flaky/"])
        defer { origin.stop() }
        try mount([origin.url("/tree/")])
        XCTAssertEqual(try Shell.run("/bin/ls", [mountpoint]).status, 0)
        XCTAssertTrue(eventually { origin.arrivals.contains("/tree/flaky/") }, "\(origin.arrivals)")
        let attempts = { origin.arrivals.filter { $0 == "/tree/flaky/" }.count }
        // The failure has been taken in once no request is left: each attempt of a listing is noted when it
        // arrives and answered at once (500); wait for every retry the fetcher makes to land.
        var previous = -1
        XCTAssertTrue(eventually {
            defer { previous = attempts() }
            usleep(500_000)
            return attempts() == previous
        })
        origin.mend()
        let listed = try Shell.run("/bin/ls", [mountpoint + "/flaky"], timeout: 60)
        XCTAssertEqual(listed.status, 0, "no EIO left by the walk: \(listed.stderr)")
        XCTAssertEqual(listed.stdout, "in.bin\n")
    }
}
