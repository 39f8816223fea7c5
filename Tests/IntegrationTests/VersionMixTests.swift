import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 45, cases 1, 2, 3 and 8: servers whose validators are weak, absent or rotating, a multipart answer that
/// matches the request at its top level, and a listing that states an old size. Each is a small Python server on
/// 127.0.0.1 doing one odd thing; rangefs runs on its default options. Versions never mix in one file, no
/// boundary is kept as data, and no read is cut short by a listing's size.
final class VersionMixTests: MountTestCase {
    /// One server for every mode; the first path segment names the mode, the rest the file in its folder:
    ///   /weak/F        ETag `W/"<digest of the content>"`, no Last-Modified (If-Range cannot be sent);
    ///   /none/F        no ETag, no Last-Modified;
    ///   /multipart/F   every ranged answer a 206 `multipart/byteranges` whose top-level Content-Range and
    ///                  Content-Length match the request, its body the multipart encoding cut to that length;
    ///   /rotatenolm/F  another strong ETag on every answer and no Last-Modified; any If-Range gets the whole file;
    ///   /list/         a JSON listing of the folder, every size stated `stale` bytes short of the file's; its
    ///                  files /list/F are served as an honest server does (a strong ETag).
    /// The log has a line per answer: mode, name, range, status, body bytes.
    static let script = """
    import hashlib, http.server, json, os, sys, threading
    port, root, log, stale = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    lock = threading.Lock()
    answers = [0]
    def note(*fields):
        with lock:
            with open(log, "a") as out:
                out.write(" ".join(str(f) for f in fields) + "\\n")
    class Odd(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def answer(self, status, headers, body):
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass
        def do_GET(self):
            with lock:
                answers[0] += 1
                n = answers[0]
            mode, _, name = self.path.lstrip("/").partition("/")
            if mode == "list" and name == "":
                files = sorted(os.listdir(root))
                listing = [{"name": f, "type": "file", "size": os.path.getsize(os.path.join(root, f)) - stale,
                            "mtime": "Tue, 14 Nov 2023 22:13:20 GMT"} for f in files]
                note(mode, "-", "-", 200, 0)
                return self.answer(200, [("Content-Type", "application/json")], json.dumps(listing).encode())
            path = os.path.join(root, name)
            if not os.path.isfile(path):
                return self.answer(404, [], b"")
            with open(path, "rb") as f:
                data = f.read()
            headers = [("Accept-Ranges", "bytes")]
            if mode == "weak":
                headers.append(("ETag", 'W/"%s"' % hashlib.sha256(data).hexdigest()[:16]))
            elif mode == "rotatenolm":
                headers.append(("ETag", '"node-%d"' % n))
            elif mode == "list":
                headers.append(("ETag", '"%s"' % hashlib.sha256(data).hexdigest()[:16]))
            asked, if_range = self.headers.get("Range"), self.headers.get("If-Range")
            start, end, status = 0, len(data), 200
            # A weak or rotating ETag never matches an If-Range (RFC 9110 §13.1.5): the whole file.
            if asked and asked.startswith("bytes=") and (if_range is None or (mode == "list" and if_range in
                                                                            [v for k, v in headers if k == "ETag"])):
                first, _, last = asked[6:].partition("-")
                start, status = int(first), 206
                end = min(len(data), int(last) + 1) if last else len(data)
            body = data[start:end]
            if status == 206:
                headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data))))
                if mode == "multipart":
                    boundary = "THIS_STRING_SEPARATES"
                    headers.append(("Content-Type", "multipart/byteranges; boundary=" + boundary))
                    part = ("--%s\\r\\nContent-Type: application/octet-stream\\r\\nContent-Range: bytes %d-%d/%d\\r\\n\\r\\n"
                            % (boundary, start, end - 1, len(data))).encode() + body
                    body = (part + ("\\r\\n--%s--\\r\\n" % boundary).encode())[:len(body)]
            note(mode, name, (asked or "-").replace(" ", ""), status, len(body))
            self.answer(status, headers, body)
        def log_message(self, *arguments):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True
    Server(("127.0.0.1", port), Odd).serve_forever()
    """

    func startOrigin(staleBy stale: Int = 0) throws -> ScriptedOrigin {
        try ScriptedOrigin(script: Self.script, prefix: "versions", arguments: [String(stale)])
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        let handle = FileHandle(forReadingAtPath: "/dev/urandom")!
        defer { try? handle.close() }
        return [UInt8](handle.readData(ofLength: count))
    }

    /// A read that failed, with its errno.
    struct ReadFailure: Error { let code: Int32 }

    /// Reads `count` bytes at `offset` of an open descriptor: the bytes, or the errno of a failed read.
    private func read(_ descriptor: Int32, at offset: Int, count: Int) -> Result<[UInt8], ReadFailure> {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = Glibc.pread(descriptor, &buffer, count, off_t(offset))
        return got < 0 ? .failure(ReadFailure(code: errno)) : .success(Array(buffer[0..<got]))
    }

    /// Case 1: a weak ETag, no date. The file is replaced by another of the same length while a handle reads it:
    /// the handle never gets the new version's bytes (ESTALE, or what the old version had cached), no file is kept
    /// complete with blocks of both, and the next open reads the new version whole.
    func testAWeakETagThatChangesMidReadNeverMixesVersions() throws {
        let origin = try startOrigin()
        defer { _ = origin.server.stop() }
        let size = 24 << 20
        let old = Self.randomBytes(size), new = Self.randomBytes(size)
        try origin.write("weak.bin", old)
        try mount([origin.url("weak", "weak.bin")])
        let path = mountpoint + "/weak.bin"
        let descriptor = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        XCTAssertEqual(try read(descriptor, at: 0, count: 65536).get(), Array(old[0..<65536]))

        try origin.write("weak.bin", new)
        let tailOffset = size - (1 << 20)
        switch read(descriptor, at: tailOffset, count: 1 << 20) {
        case .success(let bytes):
            XCTAssertEqual(bytes, Array(old[tailOffset..<(tailOffset + bytes.count)]),
                           "the old handle reads the old version's bytes or none, never the new one's")
        case .failure(let failure):
            let code = failure.code
            XCTAssertTrue(code == ESTALE || code == EIO, "the old handle fails: \(String(cString: strerror(code)))")
        }
        // Each new open reads one version whole: the new one, once the change was seen.
        var digest = ""
        for _ in 0..<10 where digest != Shell.sha256(of: Data(new)) {
            digest = (try? Shell.sha256(of: path)) ?? ""
            XCTAssertTrue([Shell.sha256(of: Data(new)), Shell.sha256(of: Data(old)), ""].contains(digest),
                          "a whole read is one version, never a mix")
        }
        XCTAssertEqual(digest, Shell.sha256(of: Data(new)), "the next open reads the new version")
        let verified = try driver.run(["verify", "weak.bin", "--mount", mountpoint])
        XCTAssertEqual(verified.status, 0, verified.stdout + verified.stderr)
    }

    /// Case 2: a 206 `multipart/byteranges` whose top-level Content-Range and length match the request is refused
    /// like a wrong encoding: the copy fails with EIO, and no boundary is cached or kept through a remount.
    func testAMultipartAnswerIsNeverKeptAsData() throws {
        let origin = try startOrigin()
        defer { _ = origin.server.stop() }
        let bytes = Self.randomBytes(1 << 20)
        try origin.write("parts.bin", bytes)
        try mount([origin.url("multipart", "parts.bin")])
        let path = mountpoint + "/parts.bin"
        let copy = scratch.path + "/parts.bin"
        let result = try Shell.run("/bin/cp", [path, copy])
        XCTAssertNotEqual(result.status, 0, "a copy of multipart answers must fail, not succeed")
        XCTAssertTrue(result.stderr.contains("Input/output error"), result.stderr)
        let written = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: copy))) ?? Data())
        XCTAssertEqual(written, Array(bytes.prefix(written.count)), "what was copied is the file's own bytes")
        XCTAssertTrue(origin.log.contains { $0[0] == "multipart" && $0[3] == "206" }, "the server sent multipart")
        let cached = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", path])
        XCTAssertEqual(cached.stdout, "0", "no part of a multipart body is cached")
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        let kept = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", path])
        XCTAssertEqual(kept.stdout, "0", "nothing was committed")
    }

    /// Case 8: a server with another strong ETag on every answer and no Last-Modified: every open, the first
    /// included, reads the file right (it is judged by its length, as one with no validator), also after a remount.
    func testARotatingETagWithoutADateReadsRight() throws {
        let origin = try startOrigin()
        defer { _ = origin.server.stop() }
        let bytes = Self.randomBytes(6 << 20)
        try origin.write("spin.bin", bytes)
        try mount([origin.url("rotatenolm", "spin.bin")])
        let path = mountpoint + "/spin.bin"
        for round in 0..<2 {
            let copy = scratch.path + "/spin-\(round).bin"
            let result = try Shell.run("/bin/cp", [path, copy])
            XCTAssertEqual(result.status, 0, "round \(round): \(result.stderr)")
            XCTAssertEqual(try Shell.sha256(of: copy), Shell.sha256(of: Data(bytes)), "round \(round)")
        }
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        XCTAssertEqual(try Shell.sha256(of: path), Shell.sha256(of: Data(bytes)), "after a remount")
    }

    /// Case 3: a listing that states each file 100 bytes short (a stale index): the first `cat` after the mount
    /// returns every byte, for each of many files, and `stat` agrees with it. The open's probe finds the real size,
    /// and the kernel forgets the listed one before the open is answered.
    func testAListingsOldSizeNeverCutsAReadShort() throws {
        let origin = try startOrigin(staleBy: 100)
        defer { _ = origin.server.stop() }
        var files: [String: [UInt8]] = [:]
        for index in 0..<24 {
            let name = String(format: "f%02d.bin", index)
            files[name] = Self.randomBytes(200 + index * 997)
            try origin.write(name, files[name]!)
        }
        try mount([origin.url("list", "")])
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let path = mountpoint + "/" + name
            let cat = try Shell.run("/bin/sh", ["-c", "cat \"$1\" | sha256sum", "sh", path])
            XCTAssertEqual(cat.status, 0, "\(name): \(cat.stderr)")
            XCTAssertTrue(cat.stdout.hasPrefix(Shell.sha256(of: Data(bytes))),
                          "\(name): the first read returns all \(bytes.count) bytes, not the listing's \(bytes.count - 100)")
            XCTAssertEqual(Int(try statFile(path).st_size), bytes.count, name)
        }
    }
}
