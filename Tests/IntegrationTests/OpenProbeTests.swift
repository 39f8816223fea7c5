import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 36, "an open answers as soon as it can": the probe of a listed file being opened (a request for its first
/// 256 KiB, or for the first block of a file its listing says is larger: FirstBytes.swift) answers the open at its
/// head while its body streams on into the file's first blocks, a probe whose answer came whole never drops its
/// connection, and the probe of a large file leaves its connection free for the next file's.
final class OpenProbeTests: MountTestCase {
    static let probeBytes = 256 << 10
    /// What the probe of a file larger than `probeBytes` asks for: the mount's first block.
    static let blockBytes = 64 << 10

    // MARK: A complete probe keeps its connection

    /// nginx with a log of each request's connection (`$connection $connection_requests`): `/ranged/` as usual
    /// (a 206 for the probe's range), `/whole/` with `max_ranges 0` (a 200 with the whole file: a server that
    /// ignores Range). Both list JSON, so `stat` costs no request and the open's probe is the first for a file.
    static var connectionOrigin: NginxOrigin!

    override class func tearDown() {
        connectionOrigin?.stop()
        connectionOrigin = nil
        super.tearDown()
    }

    func connectionOrigin() throws -> NginxOrigin {
        if let origin = Self.connectionOrigin { return origin }
        var extras = NginxOrigin.Extras()
        extras.http = { _, prefix in
            """
            log_format connections '$connection $connection_requests $status $uri $http_range';
            access_log \(prefix)/logs/connections.log connections;
            """
        }
        extras.locations = { _, _ in
            """
            location /ranged/ { autoindex on; autoindex_format json; }
            location /whole/ { max_ranges 0; autoindex on; autoindex_format json; }
            """
        }
        let origin = try NginxOrigin(extras)
        for folder in ["ranged", "whole"] {
            try FileManager.default.createDirectory(atPath: origin.path(folder), withIntermediateDirectories: true)
        }
        // Files the probe's 206 brings exactly their first block of; files a 200 brings whole in exactly 256 KiB.
        try origin.serveRandomFile("ranged/a.bin", size: 400_000)
        try origin.serveRandomFile("ranged/b.bin", size: 300_000)
        try origin.serveRandomFile("whole/a.bin", size: Self.probeBytes)
        try origin.serveRandomFile("whole/b.bin", size: Self.probeBytes)
        Self.connectionOrigin = origin
        return origin
    }

    /// Each request nginx answered for `folder`'s files: connection, request number on it, status, path, range.
    func connectionLog(_ origin: NginxOrigin, _ folder: String) -> [[String]] {
        let log = (origin.root as NSString).deletingLastPathComponent + "/logs/connections.log"
        return ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .map { $0.split(separator: " ").map(String.init) }
            .filter { $0.count >= 4 && $0[3].hasPrefix("/\(folder)/") && $0[3].hasSuffix(".bin") }
    }

    /// `user.rangefs.cached_bytes` of `path` (the kernel keeps no xattrs: always the daemon's answer).
    func cachedBytes(_ path: String) -> Int? {
        let result = try? Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", path])
        return result.flatMap { Int($0.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// `stat` then `head -c 1` of `a.bin` and then of `b.bin` of `folder`, as `ls -l` and `file` would; returns
    /// nginx's lines for their requests.
    func openOneAfterTheOther(_ folder: String, status: String, probeBytes: Int) throws -> [[String]] {
        let origin = try connectionOrigin()
        try mount([origin.url(folder + "/")])
        for name in ["a.bin", "b.bin"] {
            let path = mountpoint + "/" + name
            XCTAssertGreaterThanOrEqual(try statFile(path).st_size, off_t(Self.probeBytes))
            let original = try Data(contentsOf: URL(fileURLWithPath: origin.path(folder + "/" + name)))
            XCTAssertEqual(try fileBytes(path, offset: 0, count: 1), [UInt8](original.prefix(1)))
            // The probe's body may still stream after the open answered (the open answers at its head): the next
            // file is opened once it ended, as it has on any link where the reader takes longer than the body.
            let deadline = Date().addingTimeInterval(60)
            while cachedBytes(path) ?? 0 < probeBytes && Date() < deadline { usleep(50_000) }
            XCTAssertGreaterThanOrEqual(cachedBytes(path) ?? 0, probeBytes, "the probe's bytes are cached")
        }
        let lines = connectionLog(origin, folder)
        XCTAssertEqual(lines.map { [$0[2], $0[3]] }, [[status, "/\(folder)/a.bin"], [status, "/\(folder)/b.bin"]],
                       "one request per file, its probe: \(lines)")
        return lines
    }

    /// A 206 that brings the probe's whole range (the first block of a file larger than 256 KiB) ends by itself:
    /// the next file's probe goes out on the same connection.
    func testAProbeAnsweredWithItsWholeRangeKeepsItsConnection() throws {
        let lines = try openOneAfterTheOther("ranged", status: "206", probeBytes: Self.blockBytes)
        guard lines.count == 2 else { return }
        XCTAssertEqual(lines[1][0], lines[0][0], "the second probe reuses the first one's connection: \(lines)")
        XCTAssertEqual(Int(lines[1][1]), Int(lines[0][1]).map { $0 + 1 }, "the next request on it: \(lines)")
    }

    /// A 200 (the server ignores Range) whose whole body is exactly the probe's 256 KiB ends by itself too: it
    /// was cut on its last byte, and the next request paid a new connection.
    func testAWholeFileAnswerOfExactlyTheProbesSizeKeepsItsConnection() throws {
        let lines = try openOneAfterTheOther("whole", status: "200", probeBytes: Self.probeBytes)
        guard lines.count == 2 else { return }
        XCTAssertEqual(lines[1][0], lines[0][0], "the second probe reuses the first one's connection: \(lines)")
        XCTAssertEqual(Int(lines[1][1]), Int(lines[0][1]).map { $0 + 1 }, "the next request on it: \(lines)")
    }

    // MARK: The open answers at the probe's head

    /// A server with a JSON listing of the files in its root. An answer to a Range request sends its head and its
    /// first 128 KiB at once, then holds the rest until the file `release` exists. It logs `request PATH RANGE
    /// PORT` when a request comes (PORT: the client's, one per connection), `holding PATH` when it starts holding,
    /// `released PATH` once it sent the rest, or `dropped PATH` if the client closed the connection while it held.
    static let holdingScript = """
    import email.utils, http.server, json, os, select, socket, sys, time
    port, root, log, release = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    def note(line):
        with open(log, "a") as out:
            out.write(line + "\\n")
    class Holding(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            note("request %s %s %d" % (self.path, self.headers.get("Range", "-"), self.client_address[1]))
            if self.path == "/dir/":
                paths = [os.path.join(root, name) for name in sorted(os.listdir(root))]
                body = json.dumps([{"name": os.path.basename(path), "type": "file", "size": os.path.getsize(path),
                                    "mtime": email.utils.formatdate(os.path.getmtime(path), usegmt=True)}
                                   for path in paths]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            path = os.path.join(root, self.path[len("/dir/"):])
            if not self.path.startswith("/dir/") or not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with open(path, "rb") as f:
                data = f.read()
            mtime = os.path.getmtime(path)
            start, end, status = 0, len(data), 200
            asked = self.headers.get("Range")
            if asked and asked.startswith("bytes="):
                first, _, last = asked[6:].partition("-")
                start, end, status = int(first), min(len(data), int(last) + 1) if last else len(data), 206
            self.send_response(status)
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data)))
            self.send_header("Content-Length", str(end - start))
            self.send_header("ETag", '"%x-%x"' % (int(mtime), len(data)))
            self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
            self.end_headers()
            at_once = min(end, start + 128 * 1024)
            self.wfile.write(data[start:at_once])
            self.wfile.flush()
            if at_once < end:
                note("holding %s" % self.path)
                deadline = time.time() + 120
                while not os.path.exists(release) and time.time() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.01)
                    if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                        note("dropped %s" % self.path)
                        self.close_connection = True
                        return
                self.wfile.write(data[at_once:end])
                note("released %s" % self.path)
        def log_message(self, *arguments):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 64
    Server(("127.0.0.1", port), Holding).serve_forever()
    """

    /// `stat` and `head -c 1` of a listed file answer once the probe's head and first block came, while the
    /// server still holds the rest of the probe's 256 KiB; a READ of the held bytes waits for them from that same
    /// transfer and sends no request of its own; the origin sees one request for the probe's bytes.
    /// The holding server (`holdingScript`) serving `files` (name and size, random bytes) under `/dir/`.
    struct HoldingServer {
        let folder: TemporaryDirectory
        let server: BackgroundProcess
        let port: Int
        var root: String { folder.path + "/root" }
        var release: String { folder.path + "/release" }

        init(files: [String: Int]) throws {
            folder = try TemporaryDirectory(prefix: "holding")
            try FileManager.default.createDirectory(atPath: folder.path + "/root", withIntermediateDirectories: true)
            for (name, size) in files {
                try Shell.run("/usr/bin/head", ["-c", String(size), "/dev/urandom"],
                              stdoutFile: folder.path + "/root/" + name)
            }
            let script = folder.path + "/holding.py"
            try OpenProbeTests.holdingScript.write(toFile: script, atomically: false, encoding: .utf8)
            let (root, log, release, out) = (folder.path + "/root", folder.path + "/requests.log",
                                             folder.path + "/release", folder.path + "/server.out")
            (server, port) = try BackgroundProcess.listening { port in
                try BackgroundProcess("/usr/bin/python3", [script, String(port), root, log, release], logPath: out)
            }
        }

        func original(_ name: String) throws -> [UInt8] {
            [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + name)))
        }

        func logLines() -> [String] {
            ((try? String(contentsOfFile: folder.path + "/requests.log", encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }

        /// Lets go of every held answer, then stops the server.
        func stop() {
            _ = FileManager.default.createFile(atPath: release, contents: nil)
            _ = server.stop()
        }
    }

    func testTheOpenAnswersAtTheProbesHeadAndAReadOfItsRestWaitsForTheSameTransfer() throws {
        // No larger than the probe's 256 KiB, so the probe asks for all of it; the server holds what follows its
        // first 128 KiB.
        let holding = try HoldingServer(files: ["slow.bin": 250_000])
        defer { holding.stop() }
        let (port, release) = (holding.port, holding.release)
        let original = try holding.original("slow.bin")
        func logLines() -> [String] { holding.logLines() }

        try mount(["http://127.0.0.1:\(port)/dir/"])
        let file = mountpoint + "/slow.bin"
        XCTAssertEqual(try statFile(file).st_size, off_t(original.count))
        let first = scratch.path + "/first"
        let opened = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? Shell.run("/usr/bin/head", ["-c", "1", file], stdoutFile: first, timeout: 150)
            opened.signal()
        }
        // A deadline for a hang only: before the fix, the open waited for the whole probe, held until the release.
        let answered = opened.wait(timeout: .now() + 30) == .success
        XCTAssertTrue(answered, "head -c 1 answered while the server holds the rest of the probe")
        XCTAssertEqual(logLines().filter { !$0.hasPrefix("request") }, ["holding /dir/slow.bin"],
                       "the rest of the probe was still held when head -c 1 ended")
        if answered {
            XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: first))), [original[0]])
        }

        // A READ of bytes the probe still brings (its last block, held): it waits for them, with no request of
        // its own. It is inside read(2) of its input (dd reads it as descriptor 0) before the server lets go.
        let held = 200_000
        let reader = try BackgroundProcess("/bin/dd", ["if=\(file)", "of=\(scratch.path)/held", "bs=1000",
                                                       "skip=\(held / 1000)", "count=1", "status=none"])
        let deadline = Date().addingTimeInterval(30)
        while reader.isRunning && Date() < deadline,
              !((try? String(contentsOfFile: "/proc/\(reader.pid)/syscall", encoding: .utf8))?.hasPrefix("0 0x0 ") ?? false) {
            usleep(10_000)
        }
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        XCTAssertEqual(reader.waitForExit(timeout: 60), 0, "the READ of held bytes was answered")
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/held"))),
                       Array(original[held..<(held + 1000)]))
        XCTAssertEqual(try fileBytes(file, offset: 0, count: Self.probeBytes), original)

        // The probe's transfer lived until the server let go: head -c 1 ended while it was still held (before the
        // fix, the open waited for its end, which came when libcurl gave the stalled transfer up).
        XCTAssertEqual(logLines().first { $0.hasPrefix("released") || $0.hasPrefix("dropped") },
                       "released /dir/slow.bin", "\(logLines())")
        // One request brought the probe's bytes: none other asked for any of them.
        let probeRanges = logLines().filter { $0.hasPrefix("request /dir/slow.bin") }.map { $0.split(separator: " ")[2] }
            .filter { range in
                let start = range.dropFirst("bytes=".count).split(separator: "-").first.flatMap { Int($0) }
                return start.map { $0 < Self.probeBytes } ?? true
            }
        XCTAssertEqual(probeRanges, ["bytes=0-\(Self.probeBytes - 1)"], "\(logLines())")
    }

    /// `stat` then `head -c 1` of a listed file of 1 MiB, then of a second one, as `file` or a thumbnailer would:
    /// the first file's probe asks for its first block only, which the server sends at once, so the second
    /// file's probe goes out on the same connection. Before, the probe asked for 256 KiB, and the server's hold
    /// after 128 KiB (a link slower than the reader) kept its connection busy: the second probe paid a new one.
    func testTheProbeOfALargeFileLeavesItsConnectionFreeForTheNextFile() throws {
        let holding = try HoldingServer(files: ["a.bin": 1 << 20, "b.bin": 1 << 20])
        defer { holding.stop() }
        try mount(["http://127.0.0.1:\(holding.port)/dir/"])
        for name in ["a.bin", "b.bin"] {
            let path = mountpoint + "/" + name
            XCTAssertEqual(try statFile(path).st_size, off_t(1 << 20))
            XCTAssertEqual(try fileBytes(path, offset: 0, count: 1), Array(try holding.original(name).prefix(1)))
            // The probe's first block is cached (a probe held after 128 KiB has that much too).
            let deadline = Date().addingTimeInterval(60)
            while cachedBytes(path) ?? 0 < Self.blockBytes && Date() < deadline { usleep(20_000) }
        }
        let requests = holding.logLines().filter { $0.hasPrefix("request /dir/") && $0.contains(".bin") }
            .map { $0.split(separator: " ").map(String.init) }
        XCTAssertEqual(requests.map { [$0[1], $0[2]] },
                       [["/dir/a.bin", "bytes=0-\(Self.blockBytes - 1)"], ["/dir/b.bin", "bytes=0-\(Self.blockBytes - 1)"]],
                       "one probe per file, for its first block: \(holding.logLines())")
        XCTAssertFalse(holding.logLines().contains { $0.hasPrefix("holding") }, "no probe was held")
        if requests.count == 2 {
            XCTAssertEqual(requests[1][3], requests[0][3], "the second probe reuses the first one's connection")
        }
    }
}
