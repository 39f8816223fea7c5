import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Servers that lie as CDNs and load balancers do (issue 35), each a small Python server on 127.0.0.1 doing one odd
/// thing, with rangefs on its default options: no byte of a wrong answer is ever returned, kept or committed; a
/// file whose ETag rotates reads right, and a real change is still caught; a transfer nobody wants stops.
final class LyingServerTests: MountTestCase {
    /// One server for every mode; the first path segment names the mode, the rest the file in its folder:
    ///   /plain/F         an honest server (nginx's If-Range: the ETag or the exact Last-Modified);
    ///   /gzip/F          every answer gzip-encoded, with Content-Encoding and the encoded body's Content-Length;
    ///   /gzipchunked/F   the same, chunked, with no Content-Length;
    ///   /gzipsometimes/F every other answer gzip-encoded;
    ///   /rotate/F        another ETag on every answer; If-Range with the Last-Modified date is honoured;
    ///   /rotatestrict/F  another ETag on every answer, and any If-Range is answered with the whole file (200);
    ///   /trickle/F       a body from offset 1 MiB on is sent at one byte a second.
    /// The log has a line per answer when it starts (`start`) and when its body ended or the client left (`end`).
    static let script = """
    import email.utils, gzip, http.server, os, sys, threading, time
    port, root, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    lock = threading.Lock()
    answers = [0]
    def note(*fields):
        with lock:
            with open(log, "a") as out:
                out.write(" ".join(str(f) for f in fields) + "\\n")
    class Lying(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            with lock:
                answers[0] += 1
                n = answers[0]
            mode, _, name = self.path.lstrip("/").partition("/")
            path = os.path.join(root, name)
            if not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with open(path, "rb") as f:
                data = f.read()
            mtime = int(os.stat(path).st_mtime)
            last_modified = email.utils.formatdate(mtime, usegmt=True)
            etag = '"node-%d"' % n if mode.startswith("rotate") else '"%x-%x"' % (mtime, len(data))
            asked, if_range = self.headers.get("Range"), self.headers.get("If-Range")
            honoured = asked is not None and asked.startswith("bytes=") and (
                if_range is None or (mode != "rotatestrict" and if_range in (etag, last_modified)))
            start, end, status = 0, len(data), 200
            if honoured:
                first, _, last = asked[6:].partition("-")
                start, end, status = int(first), min(len(data), int(last) + 1) if last else len(data), 206
            body = data[start:end]
            encoded = mode in ("gzip", "gzipchunked") or (mode == "gzipsometimes" and n % 2 == 0)
            if encoded:
                body = gzip.compress(body)
            self.send_response(status)
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", last_modified)
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data)))
            if encoded:
                self.send_header("Content-Encoding", "gzip")
            chunked = mode == "gzipchunked"
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            fields = (mode, name, (asked or "-").replace(" ", ""), status, len(body), "gzip" if encoded else "identity")
            note("start", *fields)
            try:
                if chunked:
                    for at in range(0, len(body), 65536):
                        piece = body[at:at + 65536]
                        self.wfile.write(b"%x\\r\\n" % len(piece) + piece + b"\\r\\n")
                    self.wfile.write(b"0\\r\\n\\r\\n")
                elif mode == "trickle" and start >= 1 << 20:
                    for at in range(len(body)):
                        self.wfile.write(body[at:at + 1])
                        self.wfile.flush()
                        time.sleep(1)
                else:
                    self.wfile.write(body)
            except OSError:
                pass
            note("end", *fields)
        def log_message(self, *arguments):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True
    Server(("127.0.0.1", port), Lying).serve_forever()
    """

    func startLyingOrigin() throws -> ScriptedOrigin {
        try ScriptedOrigin(script: Self.script, prefix: "lying")
    }

    /// A body gzip compresses well: text lines that differ only by their number.
    static func compressibleBytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var line = 0
        while bytes.count < count {
            bytes += Array("line \(line) of a text file that compresses well\n".utf8)
            line += 1
        }
        return Array(bytes.prefix(count))
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        let handle = FileHandle(forReadingAtPath: "/dev/urandom")!
        defer { try? handle.close() }
        return [UInt8](handle.readData(ofLength: count))
    }

    func attribute(_ name: String, of path: String) throws -> String {
        try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", name, path]).stdout
    }

    func fileStatus(_ name: String) throws -> [String: Any] {
        let result = try driver.run(["status", "--mount", mountpoint, "--json", "--all"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        return try XCTUnwrap(files.first { $0["name"] as? String == name }, "\(name) in \(files)")
    }

    /// Every answer gzip-encoded (with a length and chunked; random and compressible bodies): no wrong byte is
    /// returned, marked present or committed. The read fails with EIO, status says `error` and names the
    /// encoding, and a remount of the cache finds nothing cached either.
    func testGzipEncodedAnswersAreNeverKept() throws {
        let origin = try startLyingOrigin()
        defer { _ = origin.server.stop() }
        let size = 2 << 20
        try origin.write("random.bin", Self.randomBytes(size))
        try origin.write("text.bin", Self.compressibleBytes(size))
        let files = [("gzip", "random.bin"), ("gzip", "text.bin"), ("gzipchunked", "random.bin"),
                     ("gzipchunked", "text.bin")]
        let names = files.map { "\($0.0)-\($0.1)" }
        try mount(zip(names, files).map { "\($0)=\(origin.url($1.0, $1.1))" })
        for (name, file) in zip(names, files) {
            let path = mountpoint + "/" + name
            XCTAssertEqual(try statFile(path).st_size, off_t(size), name)
            let copy = scratch.path + "/" + name
            let result = try Shell.run("/bin/cp", [path, copy])
            XCTAssertNotEqual(result.status, 0, "\(name): a copy of gzip answers must fail, not succeed")
            XCTAssertTrue(result.stderr.contains("Input/output error"), "\(name): \(result.stderr)")
            // Whatever the copy wrote before it failed is the file's own bytes.
            let written = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: copy))) ?? Data())
            XCTAssertEqual(written, Array(try origin.bytes(file.1).prefix(written.count)), name)
            XCTAssertEqual(try attribute("user.rangefs.cached_bytes", of: path), "0", name)
            XCTAssertNotEqual(try attribute("user.rangefs.state", of: path), "complete", name)
            let status = try fileStatus(name)
            XCTAssertEqual(status["state"] as? String, "error", name)
            let reason = status["last_error"] as? String ?? ""
            XCTAssertTrue(reason.contains("gzip") && reason.contains("server"), "\(name): \(reason)")
        }
        XCTAssertTrue(origin.log.contains { $0[0] == "start" && $0[1] == "gzipchunked" && $0[6] == "gzip" })
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        for name in names {
            XCTAssertEqual(try attribute("user.rangefs.cached_bytes", of: mountpoint + "/" + name), "0",
                           "\(name): nothing was committed")
        }
    }

    /// A server that gzips every other answer (one node of two behind a balancer): the wrong answers are refused
    /// and asked again, and the file reads right.
    func testAnAnswerRefusedIsAskedAgainAndTheFileReadsRight() throws {
        let origin = try startLyingOrigin()
        defer { _ = origin.server.stop() }
        try origin.write("mixed.bin", Self.randomBytes(6 << 20))
        try mount([origin.url("gzipsometimes", "mixed.bin")])
        let copy = scratch.path + "/mixed.bin"
        let result = try Shell.run("/bin/cp", [mountpoint + "/mixed.bin", copy])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try Shell.sha256(of: copy), try Shell.sha256(of: origin.root + "/mixed.bin"))
        XCTAssertTrue(origin.log.contains { $0[0] == "start" && $0[6] == "gzip" && $0[4] == "206" },
                      "some ranged answers were gzip-encoded")
    }

    /// A server whose ETag changes on every answer, with the same length and date: the file reads right, through
    /// servers that honour If-Range with the date and servers that answer any If-Range with the whole file; the log
    /// says so once for the server. A real change (a new date) is still caught: the old handle gets ESTALE, a new
    /// open reads the new version, never a mix.
    func testARotatingETagFileReadsRightAndARealChangeIsStillCaught() throws {
        let origin = try startLyingOrigin()
        defer { _ = origin.server.stop() }
        let size = 8 << 20
        try origin.write("a.bin", Self.randomBytes(size))
        try origin.write("b.bin", Self.randomBytes(size))
        let log = scratch.path + "/rangefs.log"
        try mount(["a.bin=" + origin.url("rotate", "a.bin"), "b.bin=" + origin.url("rotatestrict", "b.bin")],
                  extra: ["--log-file", log])
        for name in ["a.bin", "b.bin"] {
            let copy = scratch.path + "/" + name
            let result = try Shell.run("/bin/cp", [mountpoint + "/" + name, copy])
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            XCTAssertEqual(try Shell.sha256(of: copy), try Shell.sha256(of: origin.root + "/" + name), name)
        }
        XCTAssertTrue(origin.log.contains { $0[0] == "start" && $0[1] == "rotate" && $0[4] == "206" },
                      "Last-Modified served as the validator")
        let said = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { $0.contains("sends another ETag on each answer") }
        XCTAssertEqual(said.count, 1, "one line for the server: \(said)")

        // A real change while a handle reads: a new date, new bytes of the same length.
        let large = 32 << 20
        try origin.write("c.bin", Self.randomBytes(large))
        let added = try driver.run(["add", origin.url("rotate", "c.bin"), "--mount", mountpoint])
        XCTAssertEqual(added.status, 0, added.stderr)
        let path = mountpoint + "/c.bin"
        let handle = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(handle, 0)
        defer { close(handle) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        XCTAssertEqual(Glibc.pread(handle, &buffer, buffer.count, 0), buffer.count)
        XCTAssertEqual(buffer, Array(try origin.bytes("c.bin").prefix(buffer.count)))
        let changed = Self.randomBytes(large)
        try origin.write("c.bin", changed, mtime: 1_700_000_600)
        // Far past any readahead of the first read: these bytes come from the server, which has the new version.
        XCTAssertEqual(Glibc.pread(handle, &buffer, buffer.count, off_t(30 << 20)), -1, "the old version is gone")
        XCTAssertEqual(errno, ESTALE)
        let copy = scratch.path + "/c.bin"
        var copied = try Shell.run("/bin/cp", [path, copy])
        if copied.status != 0 { copied = try Shell.run("/bin/cp", [path, copy]) }  // a handle opened mid-change
        XCTAssertEqual(copied.status, 0, copied.stderr)
        XCTAssertEqual(try Shell.sha256(of: copy), Shell.sha256(of: Data(changed)), "the new version, whole")
    }

    /// A server known to rotate its ETags (found by a file read in ranges) keeps its files cached across a remount,
    /// also a small file whose only request was the open's, which never met an If-Range: the remount's probe brings
    /// yet another ETag, and the cached data is kept (it was dropped and fetched again before).
    func testFilesOfARotatingServerStayCachedAcrossARemount() throws {
        let origin = try startLyingOrigin()
        defer { _ = origin.server.stop() }
        try origin.write("big.bin", Self.randomBytes(8 << 20))
        try origin.write("small.bin", Self.randomBytes(100_000))
        let log = scratch.path + "/rangefs.log"
        try mount([origin.url("rotate", "big.bin"), origin.url("rotate", "small.bin")], extra: ["--log-file", log])
        for name in ["big.bin", "small.bin"] {
            let copied = try Shell.run("/bin/cp", [mountpoint + "/" + name, scratch.path + "/" + name])
            XCTAssertEqual(copied.status, 0, copied.stderr)
        }
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(try String(contentsOfFile: cache + "/rotating-etags", encoding: .utf8),
                       "http://127.0.0.1:\(origin.port)\n")
        let before = origin.log.count
        try mount([], extra: ["--log-file", log])
        for (name, size) in [("big.bin", 8 << 20), ("small.bin", 100_000)] {
            XCTAssertEqual(try attribute("user.rangefs.cached_bytes", of: mountpoint + "/" + name), String(size), name)
            let copy = scratch.path + "/again-" + name
            let copied = try Shell.run("/bin/cp", [mountpoint + "/" + name, copy])
            XCTAssertEqual(copied.status, 0, copied.stderr)
            XCTAssertEqual(try Shell.sha256(of: copy), try Shell.sha256(of: origin.root + "/" + name), name)
        }
        let after = origin.log.dropFirst(before).filter { $0.count > 5 && $0[0] == "start" }
        XCTAssertTrue(after.allSatisfy { Int($0[5]) ?? 0 <= 1 }, "no data fetched again after the remount: \(after)")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertFalse(text.contains("dropping its cached data"), text)
    }

    /// A server that trickles a byte a second: once the reader is gone (killed by `timeout`), rangefs leaves the
    /// transfer within the transfer timeout (20 s) and asks no more, where it used to go on for minutes.
    func testATransferNobodyWantsStops() throws {
        let origin = try startLyingOrigin()
        defer { _ = origin.server.stop() }
        try origin.write("slow.bin", Self.randomBytes(8 << 20))
        try mount([origin.url("trickle", "slow.bin")])
        let reader = try Shell.run("/usr/bin/timeout", ["3", "/bin/dd", "if=\(mountpoint)/slow.bin", "of=/dev/null",
                                                        "bs=4096", "skip=1024", "count=1"])
        XCTAssertNotEqual(reader.status, 0, "the reader was killed while it waited")
        let killed = Date()
        func open() -> Int {
            let events = origin.log.filter { $0.count > 1 && $0[1] == "trickle" }
            return events.filter { $0[0] == "start" }.count - events.filter { $0[0] == "end" }.count
        }
        while open() > 0 && Date().timeIntervalSince(killed) < 60 { usleep(200_000) }
        let ended = Date().timeIntervalSince(killed)
        XCTAssertEqual(open(), 0, "the trickling transfer still runs \(Int(ended)) s after its reader left")
        XCTAssertLessThanOrEqual(ended, 30, "left \(Int(ended)) s after the reader; the transfer timeout is 20 s")
        let started = origin.log.filter { $0.count > 1 && $0[0] == "start" && $0[1] == "trickle" }.count
        sleep(4)  // longer than any retry's delay: nothing asks again
        XCTAssertEqual(origin.log.filter { $0.count > 1 && $0[0] == "start" && $0[1] == "trickle" }.count, started,
                       "no new request for a file nobody reads")
    }
}
