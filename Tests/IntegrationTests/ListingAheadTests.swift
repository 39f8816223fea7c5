import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 46: an object store's next page is asked while the page before still arrives, so the store makes one page
/// while rangefs reads the other (1,000 pages for a million objects, the server's time and the parse's added up).
/// The server below sends each page in two parts: up to its NextContinuationToken at once, the rest only once the
/// next page's request has reached it. Its log, not rangefs, says what was asked and when.
final class ListingAheadTests: MountTestCase {
    /// The server: `/bkt?list-type=2&prefix=many/...` lists 3,500 keys under `many/`, 1,000 a page; any other
    /// prefix lists none. Log lines: `asked TOKEN` as a request arrives (`-` for the first page), `whole TOKEN
    /// NEXT-ASKED` once the page was sent whole, NEXT-ASKED `yes` when the next page's request had come first and
    /// `no` when the server gave up waiting for it (60 s) and sent the rest anyway.
    static let script = """
import hashlib, http.server, sys, threading, urllib.parse
port, root, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()
asked = {}
def note(*fields):
    with lock:
        with open(log, "a") as out:
            out.write(" ".join(str(f) for f in fields) + "\\n")
def arrival(token):
    with lock:
        return asked.setdefault(token, threading.Event())
class Ahead(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        path, _, query = self.path.partition("?")
        fields = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if not (path.startswith("/bkt") and fields.get("list-type") == "2"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        token = fields.get("continuation-token")
        note("asked", token or "-")
        arrival(token or "-").set()
        count = 3500 if fields.get("prefix") == "many/" else 0
        start = int(token or 0)
        end = min(count, start + 1000)
        head = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name>'
                '<Prefix>%s</Prefix><Delimiter>/</Delimiter><IsTruncated>%s</IsTruncated>'
                % (fields.get("prefix", ""), "true" if end < count else "false"))
        if end < count:
            head += "<NextContinuationToken>%d</NextContinuationToken>" % end
        rest = "".join("<Contents><Key>many/photo-%04d.jpg</Key><LastModified>2026-11-01T10:00:00.000Z"
                       "</LastModified><ETag>&quot;%s&quot;</ETag><Size>1</Size></Contents>"
                       % (i, hashlib.md5(str(i).encode()).hexdigest()) for i in range(start, end))
        rest += "</ListBucketResult>"
        first, second = head.encode(), rest.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(first) + len(second)))
        self.end_headers()
        self.wfile.write(first)
        self.wfile.flush()
        next_asked = "-"
        if end < count:
            next_asked = "yes" if arrival(str(end)).wait(60) else "no"
        self.wfile.write(second)
        self.wfile.flush()
        note("whole", token or "-", next_asked)
    def log_message(self, *arguments):
        pass
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True
Server(("127.0.0.1", port), Ahead).serve_forever()
"""

    /// Every page but the last is still arriving when the next is asked; each page is asked once, in order, and
    /// `ls` shows every key of the four pages.
    func testEachPageIsAskedWhileThePageBeforeItStillArrives() throws {
        let origin = try ScriptedOrigin(script: Self.script, prefix: "ahead")
        defer { _ = origin.server.stop() }
        try mount(["s3://bkt/many/", "--s3-endpoint", "http://127.0.0.1:\(origin.port)", "--s3-no-sign",
                   "--s3-region", "us-east-1"])
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted()
        XCTAssertEqual(names.count, 3500, "every key listed")
        XCTAssertEqual(names.first, "photo-0000.jpg")
        XCTAssertEqual(names.last, "photo-3499.jpg")
        let log = origin.log
        XCTAssertEqual(log.filter { $0[0] == "asked" }.map { $0[1] }, ["-", "1000", "2000", "3000"],
                       "each page asked once, in order")
        // Sorted: a page asked ahead may come whole before the page before it.
        XCTAssertEqual(log.filter { $0[0] == "whole" }.map { $0[1] + " " + $0[2] }.sorted(),
                       ["- yes", "1000 yes", "2000 yes", "3000 -"],
                       "every page but the last still arriving when the next was asked: \(log)")
    }
}
