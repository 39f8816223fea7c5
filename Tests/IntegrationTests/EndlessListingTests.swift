import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 45, case 5: listings that cannot hang a mount. A purpose-written server on 127.0.0.1, rangefs on its
/// default options unless the option is the point: a page of links on one line mounts as fast as any; a listing
/// sent without end fails `rangefs mount` within its deadline with a line naming the option; and a stop (SIGINT to
/// `rangefs mount`, SIGTERM to its daemon) while the mount waits for such a listing ends everything: no daemon, no
/// mount, and the server sees the listing's connection close.
final class EndlessListingTests: MountTestCase {
    /// The server's paths:
    ///   /oneline/N/   a page of N links (`file-I.bin`) all on one line, as minified pages are;
    ///   /endless/     a listing sent at about 2 KB/s for ever (a link every 25 ms), with no length;
    ///   anything else 404.
    /// The log has a line `start PATH` when an answer starts and `end PATH` when its body ended or the client left.
    static let script = """
    import http.server, sys, threading, time
    port, log = int(sys.argv[1]), sys.argv[2]
    lock = threading.Lock()
    def note(*fields):
        with lock:
            with open(log, "a") as out:
                out.write(" ".join(str(f) for f in fields) + "\\n")
    class Listings(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            parts = self.path.strip("/").split("/")
            note("start", self.path)
            try:
                if parts[0] == "oneline" and len(parts) == 2:
                    links = "".join('<a href="file-%d.bin">file-%d.bin</a> ' % (i, i) for i in range(int(parts[1])))
                    body = ("<html><body><pre>" + links + "</pre></body></html>").encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif parts[0] == "endless":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b"<html><body><pre>")
                    i = 0
                    while True:
                        self.wfile.write(b'<a href="endless-%08d.bin">endless-%08d.bin</a>\\n' % (i, i))
                        self.wfile.flush()
                        i += 1
                        time.sleep(0.025)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
            except OSError:
                pass
            note("end", self.path)
        def log_message(self, *arguments):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True
    Server(("127.0.0.1", port), Listings).serve_forever()
    """

    struct ListingOrigin {
        let folder: TemporaryDirectory
        let server: BackgroundProcess
        let port: Int

        func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

        var log: [String] {
            ((try? String(contentsOfFile: folder.path + "/answers.log", encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }

        /// Waits up to `seconds` for a log line; false if none came.
        func waitFor(_ line: String, seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if log.contains(line) { return true }
                usleep(50_000)
            }
            return false
        }
    }

    func startListingOrigin() throws -> ListingOrigin {
        let folder = try TemporaryDirectory(prefix: "listings")
        let script = folder.path + "/listings.py"
        try Self.script.write(toFile: script, atomically: false, encoding: .utf8)
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port), folder.path + "/answers.log"],
                                  logPath: folder.path + "/server.out")
        }
        return ListingOrigin(folder: folder, server: server, port: port)
    }

    /// Whether a process still holds the cache's lock (a daemon is alive).
    func cacheLocked() -> Bool {
        let descriptor = open(cache + "/lock", O_RDWR)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(descriptor, LOCK_UN)
        return false
    }

    /// Whether process `pid` has ended: gone, or a zombie nobody reaped yet (a container's init may not).
    func exited(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }

    func testAPageOfLinksOnOneLineMounts() throws {
        // Before: each link's size and date were read from the rest of its line; 20,000 links on one line (0.8 MB)
        // took many minutes at full CPU, and `rangefs mount` waited for them. The bound is generous: the page
        // is read in well under a second.
        let origin = try startListingOrigin()
        defer { origin.server.stop() }
        let count = 20_000
        let started = Date()
        let result = try driver.mount(mountpoint, urls: [origin.url("oneline/\(count)/")], cache: cache)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(driver.isMounted(mountpoint), result.stderr)
        print("mounted a one-line page of \(count) links in \(Date().timeIntervalSince(started)) s")
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint)
        XCTAssertEqual(names.count, count)
        XCTAssertTrue(names.contains("file-19999.bin"))
        // One request: the listing (a names-only ls probes nothing).
        XCTAssertEqual(origin.log.filter { $0.hasPrefix("start") }, ["start /oneline/\(count)/"])
    }

    func testAnEndlessListingFailsTheMountWithinItsDeadline() throws {
        let origin = try startListingOrigin()
        defer { origin.server.stop() }
        let started = Date()
        // The deadline is the point here; 600 s by default.
        let result = try driver.mount(mountpoint, urls: [origin.url("endless/")], cache: cache,
                                      extra: ["--listing-timeout", "5"])
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("did not arrive within 5 s") && result.stderr.contains("--listing-timeout"),
                      result.stderr)
        XCTAssertLessThan(took, 60, "the mount took \(took) s to give up a listing with a 5 s deadline")
        XCTAssertFalse(driver.isMounted(mountpoint))
        // The daemon is gone, and so is its request.
        try driver.waitForUnlock(cache)
        XCTAssertFalse(cacheLocked())
        XCTAssertTrue(origin.waitFor("end /endless/", seconds: 20), origin.log.joined(separator: "\n"))
    }

    func testSIGINTToTheMountCommandStopsAMountWaitingForAnEndlessListing() throws {
        try stopWhileListing { mount, _ in kill(mount.pid, SIGINT) }
    }

    func testSIGTERMToTheDaemonStopsAMountWaitingForAnEndlessListing() throws {
        try stopWhileListing { _, daemon in kill(daemon, SIGTERM) }
    }

    /// Starts `rangefs mount` of the endless listing with the default options, waits until its daemon is reading
    /// it, calls `stop` with the command and the daemon's pid; then checks that everything ended: the command with
    /// status 1 and the daemon's line, the daemon, the mount, the listing's connection.
    func stopWhileListing(_ stop: (BackgroundProcess, pid_t) -> Void) throws {
        let origin = try startListingOrigin()
        defer { origin.server.stop() }
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(mountpoint)") }
        let output = scratch.path + "/mount.out"
        let mount = try BackgroundProcess(driver.binary, ["mount", mountpoint, origin.url("endless/"), "--cache", cache],
                                          logPath: output)
        defer { mount.stop(signal: SIGKILL) }
        XCTAssertTrue(origin.waitFor("start /endless/", seconds: 30), "the listing was never asked for")
        let daemon = try XCTUnwrap(driver.daemonPID(cache: cache), "no daemon holds the cache")
        usleep(500_000)  // a few links in
        stop(mount, daemon)
        let status = mount.waitForExit(timeout: 30)
        let stderr = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        XCTAssertNotNil(status, "rangefs mount still runs 30 s after the stop: \(stderr)")
        if let status { XCTAssertEqual((status >> 8) & 0xff, 1, stderr) }
        XCTAssertTrue(stderr.contains("before \(mountpoint) was mounted; nothing is mounted there"), stderr)
        try driver.waitForUnlock(cache)
        XCTAssertFalse(cacheLocked(), "the daemon (pid \(daemon)) lives on")
        XCTAssertTrue(exited(daemon), "the daemon (pid \(daemon)) lives on")
        XCTAssertFalse(driver.isMounted(mountpoint))
        XCTAssertTrue(origin.waitFor("end /endless/", seconds: 20), "the listing is still being fetched")
    }
}
