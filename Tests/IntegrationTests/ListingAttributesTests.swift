import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 35, cases 6 and 7: what `ls`, `ls -ls`, `stat` and `du` cost and show in a listed directory. A file read
/// whole shows its cached bytes at once, though the kernel keeps a listed file's attributes for the listing's
/// minute; and a names-only `ls` sends no request, though the kernel asks READDIRPLUS for it.
final class ListingAttributesTests: MountTestCase {
    /// `user.rangefs.cached_bytes` of `path`, from getfattr; nil if it cannot be read.
    func cachedBytesAttribute(_ path: String) -> UInt64? {
        let result = try? Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", path])
        return result.flatMap { $0.status == 0 ? UInt64($0.stdout) : nil }
    }

    /// Polls `condition` every 10 ms until it holds or `deadline` passes; whether it held.
    func poll(until deadline: Date, _ condition: () throws -> Bool) rethrows -> Bool {
        while true {
            if try condition() { return true }
            if Date() >= deadline { return false }
            usleep(10_000)
        }
    }

    // Case 6: a file of a listed directory (nginx autoindex, JSON and HTML), read whole: `stat -c %b` and `du` show
    // its cached bytes within 1 s of the daemon having them (its xattr says so). The kernel holds the file's
    // attributes from before the read, given for the listing's freshness (60 s) while nothing was cached: from
    // the lookup of its path for one file, from `ls -ls` (READDIRPLUS) for the other.
    func testAListedFileReadWholeShowsItsCachedBytesWithinASecond() throws {
        let size = 3_000_000
        try FileManager.default.createDirectory(atPath: origin.root + "/listed", withIntermediateDirectories: true)
        let digests = ["after-stat.bin": try origin.serveRandomFile("listed/after-stat.bin", size: size),
                       "after-ls.bin": try origin.serveRandomFile("listed/after-ls.bin", size: size)]
        try mount([origin.url("listed-json/"), origin.url("listed/")])
        let blocks = (size + 511) / 512
        for directory in ["listed-json", "listed"] {
            for name in ["after-stat.bin", "after-ls.bin"] {
                let path = mountpoint + "/" + directory + "/" + name
                if name == "after-ls.bin" {
                    let listed = try Shell.run("/bin/ls", ["-ls", mountpoint + "/" + directory])
                    XCTAssertEqual(listed.status, 0, listed.stderr)
                }
                XCTAssertEqual(try statFile(path).st_blocks, 0, "\(directory)/\(name): nothing cached before the read")
                XCTAssertEqual(try Shell.sha256(of: path), digests[name], "\(directory)/\(name)")
                // The daemon has every byte once its own count says so (generous: the disk of a loaded machine).
                XCTAssertTrue(poll(until: Date().addingTimeInterval(60)) { cachedBytesAttribute(path) == UInt64(size) },
                              "\(directory)/\(name): the daemon never had the whole file")
                let shown = poll(until: Date().addingTimeInterval(1)) { (try? statFile(path).st_blocks) == blocks }
                let now = try statFile(path).st_blocks
                XCTAssertTrue(shown, "\(directory)/\(name): st_blocks \(now), not \(blocks), "
                              + "1 s after the daemon had the whole file")
                let du = try Shell.run("/usr/bin/du", ["-B512", path])
                XCTAssertEqual(du.stdout.split(separator: "\t").first.map(String.init), String(blocks), du.stderr)
            }
        }
    }

    /// Serves `/page/`, an HTML page of `links` links without sizes (`f000000.bin`...), `/small/`, a page of five
    /// (`s0.bin`...), and every file they name (ranges included), logging each request's path and Range header.
    static let linksServer = """
    import http.server, sys, threading
    port, links, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    def page(names):
        rows = ''.join('<a href="%s">%s</a>\\n' % (name, name) for name in names)
        return ('<html><body><h1>Index</h1>\\n' + rows + '</body></html>\\n').encode()
    pages = {'/page/': page('f%06d.bin' % index for index in range(links)),
             '/small/': page('s%d.bin' % index for index in range(5))}
    lock = threading.Lock()
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'
        disable_nagle_algorithm = True
        def do_GET(self):
            with lock, open(log, 'a') as out:
                out.write('%s %s\\n' % (self.path, self.headers.get('Range', '-')))
            if self.path in pages:
                return self.answer(200, pages[self.path], 'text/html')
            name = self.path.rsplit('/', 1)[-1]
            if not (self.path.startswith('/page/f') or self.path.startswith('/small/s')) or not name.endswith('.bin'):
                return self.answer(404, b'', 'text/plain')
            body = name.encode() * (100 + sum(name.encode()) % 50)
            wanted = self.headers.get('Range', '')
            if not wanted.startswith('bytes='):
                return self.answer(200, body, 'application/octet-stream')
            first, _, last = wanted[6:].partition('-')
            first, last = int(first), min(int(last) if last else len(body) - 1, len(body) - 1)
            self.answer(206, body[first:last + 1], 'application/octet-stream',
                        {'Content-Range': 'bytes %d-%d/%d' % (first, last, len(body))})
        def answer(self, status, body, kind, extra={}):
            self.send_response(status)
            self.send_header('Content-Type', kind)
            self.send_header('Content-Length', str(len(body)))
            self.send_header('Last-Modified', 'Mon, 02 Nov 2026 10:00:00 GMT')
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 256
        daemon_threads = True
    Server(('127.0.0.1', port), Handler).serve_forever()
    """

    /// The size the links server gives file `name`.
    static func linkSize(_ name: String) -> Int {
        name.utf8.count * (100 + name.utf8.reduce(0) { $0 + Int($1) } % 50)
    }

    // Case 7: on a page of 100,000 links without sizes, `ls --color=never` and a plain `ls` (as typed, without a
    // terminal) list every name and send no request beyond the page itself, counted in the server's own log;
    // `ls -l` of a page of five probes each link once, shows its size, and a second `ls -l` sends nothing.
    func testANamesOnlyLsOfAHundredThousandLinksSendsNoRequest() throws {
        let log = scratch.path + "/links.log"
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", ["-c", Self.linksServer, String(port), "100000", log])
        }
        defer { server.stop() }
        /// The requests the server has logged so far, as (path, range), without the two listings.
        func fileRequests() -> [(path: String, range: String)] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ").map(String.init)
                guard fields.count == 2, !fields[0].hasSuffix("/") else { return nil }
                return (fields[0], fields[1])
            }
        }
        try mount(["http://127.0.0.1:\(port)/page/", "http://127.0.0.1:\(port)/small/"])  // each listed at mount
        XCTAssertEqual(fileRequests().count, 0, "the mount probes no link")
        let names = (0..<100_000).map { String(format: "f%06d.bin", $0) }
        for arguments in [["--color=never"], []] {
            let listed = try Shell.run("/bin/ls", arguments + [mountpoint + "/page"], timeout: 300)
            XCTAssertEqual(listed.status, 0, listed.stderr)
            XCTAssertEqual(listed.stdout.split(separator: "\n").map(String.init), names, "ls \(arguments): every name")
            let sent = fileRequests()
            XCTAssertEqual(sent.count, 0, "ls \(arguments) sent \(sent.count) requests, e.g. \(sent.prefix(3))")
        }

        /// The requests for the small page's files.
        func smallRequests() -> [String] { fileRequests().map(\.path).filter { $0.hasPrefix("/small/") } }
        let small = (0..<5).map { "s\($0).bin" }
        let first = try Shell.run("/bin/ls", ["-l", mountpoint + "/small"])
        XCTAssertEqual(first.status, 0, first.stderr)
        var shown: [String: Int] = [:]
        for line in first.stdout.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 9, let size = Int(fields[4]) { shown[String(fields[8])] = size }
        }
        XCTAssertEqual(shown, Dictionary(uniqueKeysWithValues: small.map { ($0, Self.linkSize($0)) }), first.stdout)
        XCTAssertEqual(smallRequests().sorted(), small.map { "/small/" + $0 }, "ls -l probes each link once")
        XCTAssertEqual(try Shell.run("/bin/ls", ["-l", mountpoint + "/small"]).status, 0)
        XCTAssertEqual(smallRequests().count, small.count, "a second ls -l sends nothing")
    }
}
