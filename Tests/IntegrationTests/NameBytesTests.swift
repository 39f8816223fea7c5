import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 35, case 4: file names are bytes. A server that lists `é.txt` spelled NFC (`%C3%A9.txt`) and NFD
/// (`e%CC%81.txt`) as two files with two contents is mounted as two names, each its own bytes, each opening its own
/// URL; names holding a newline or a tab are left out, with one log line for their directory.
final class NameBytesTests: MountTestCase {
    /// A listing server: `/html/` answers an HTML page of links, `/json/` an nginx-style JSON listing, both naming
    /// the same files; the files answer Range requests. Each request is logged as `METHOD PATH RANGE`.
    static let server = #"""
    import hashlib, http.server, json, sys, urllib.parse
    port, log = int(sys.argv[1]), sys.argv[2]
    FILES = {
        "\u00e9.txt".encode(): b"composed: the NFC spelling\n",
        "e\u0301.txt".encode(): b"decomposed: the NFD spelling, a longer one\n",
        b"new\nline.txt": b"a newline in the name\n",
        b"t\tab.txt": b"a tab in the name\n",
        b"plain.txt": b"plain\n",
    }
    DATE = "Mon, 23 Nov 2026 10:00:00 GMT"

    def html():
        links = "".join('<a href="%s">%s</a>\n' % (urllib.parse.quote(name), urllib.parse.quote(name)) for name in FILES)
        return ('<html><body><pre><a href="../">../</a>\n' + links + "</pre></body></html>\n").encode()

    def listing():
        return json.dumps([{"name": name.decode(), "type": "file", "size": len(body), "mtime": DATE}
                           for name, body in FILES.items()]).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_HEAD(self):
            self.answer(False)

        def do_GET(self):
            self.answer(True)

        def answer(self, with_body):
            path = self.path.split("?")[0]
            with open(log, "a") as file:
                file.write("%s %s %s\n" % (self.command, path, self.headers.get("Range", "-")))
            if path == "/html/":
                return self.send(200, html(), {"Content-Type": "text/html"}, with_body)
            if path == "/json/":
                return self.send(200, listing(), {"Content-Type": "application/json"}, with_body)
            folder, _, name = path.rpartition("/")
            content = FILES.get(urllib.parse.unquote_to_bytes(name)) if folder in ("/html", "/json") else None
            if content is None:
                return self.send(404, b"not found\n", {}, with_body)
            headers = {"Last-Modified": DATE, "ETag": '"%s"' % hashlib.md5(content).hexdigest(),
                       "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            spec = self.headers.get("Range", "")
            if spec.startswith("bytes=") and spec[6:].partition("-")[0]:
                first, _, last = spec[6:].partition("-")
                start, end = int(first), min(int(last) if last else len(content) - 1, len(content) - 1)
                if start >= len(content):
                    return self.send(416, b"", {"Content-Range": "bytes */%d" % len(content)}, with_body)
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, len(content))
                return self.send(206, content[start:end + 1], headers, with_body)
            self.send(200, content, headers, with_body)

        def send(self, status, body, headers, with_body):
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def log_message(self, *arguments):
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True

    Server(("127.0.0.1", port), Handler).serve_forever()
    """#

    /// The names in folder `path` as their bytes, read with readdir(3) so that nothing on the way can normalize them.
    func namesAsBytes(in path: String) throws -> Set<[UInt8]> {
        guard let directory = opendir(path) else {
            throw TestSupportError("opendir \(path): \(String(cString: strerror(errno)))")
        }
        defer { closedir(directory) }
        var names = Set<[UInt8]>()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != Array(".".utf8) && name != Array("..".utf8) { names.insert(name) }
        }
        return names
    }

    func testNFCAndNFDNamesAreTwoFilesThatOpenTheirOwnURLsAndControlCharactersAreLeftOut() throws {
        let folder = try TemporaryDirectory(prefix: "names")
        let script = folder.path + "/server.py"
        try Self.server.write(toFile: script, atomically: false, encoding: .utf8)
        let requests = folder.path + "/requests.log"
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port), requests], logPath: folder.path + "/out.log")
        }
        defer { _ = server.stop(signal: SIGTERM) }
        let log = scratch.path + "/rangefs.log"
        let mounted = try mount(["http://127.0.0.1:\(port)/html/", "http://127.0.0.1:\(port)/json/"],
                                extra: ["--log-file", log])

        let nfc = "\u{E9}.txt", nfd = "e\u{301}.txt"
        // Pairs, not a dictionary: a `String`-keyed dictionary holds the two spellings as one key.
        let contents = [(nfc, "composed: the NFC spelling\n"), (nfd, "decomposed: the NFD spelling, a longer one\n")]
        for listing in ["html", "json"] {
            let directory = mountpoint + "/" + listing
            XCTAssertEqual(try namesAsBytes(in: directory), Set([Array(nfc.utf8), Array(nfd.utf8), Array("plain.txt".utf8)]),
                           "\(listing): both spellings as their own bytes, no ' (2)', no name with a newline or tab")
            for (name, content) in contents {
                // Opened by its bytes (open(2) takes the String's UTF-8 as it is).
                let bytes = try pread(directory + "/" + name, offset: 0, count: 4096)
                XCTAssertEqual(String(decoding: bytes, as: UTF8.self), content,
                               "\(listing)/\(name.unicodeScalars.map { String($0.value, radix: 16) }): its own URL's content")
            }
            XCTAssertEqual(String(decoding: try pread(directory + "/plain.txt", offset: 0, count: 100), as: UTF8.self),
                           "plain\n")
        }
        // One line per directory for its names with control characters, however often it is looked at: on the
        // mount's stderr when the mount lists it, else in the daemon's log.
        XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
        let deadline = Date().addingTimeInterval(30)
        func logText() -> String {
            mounted.stderr + String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
        }
        func controlLines() -> [Substring] {
            logText().split(separator: "\n").filter { $0.contains("control characters") }
        }
        while controlLines().count < 2 && Date() < deadline { usleep(100_000) }
        let lines = controlLines()
        XCTAssertEqual(lines.filter { $0.contains("/html/") }.count, 1, logText())
        XCTAssertEqual(lines.filter { $0.contains("/json/") }.count, 1, logText())
        XCTAssertTrue(lines.allSatisfy { $0.contains("left out 2 names") && $0.contains("\\n") && $0.contains("\\t") },
                      lines.joined(separator: "\n"))
        try driver.unmount(mountpoint, cache: cache)
    }
}
