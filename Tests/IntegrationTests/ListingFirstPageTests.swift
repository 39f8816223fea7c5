import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 46: the mount returns once its directory is known to be a listing (its first page), not after the whole
/// listing; a reader of the directory waits for the rest. A purpose-written server holds its listing back after the
/// first page until the test lets it go: the mount must return meanwhile, and `ls` must wait and then show every
/// entry. Before, the mount waited for the last page (42 s for 100,000 objects on the S3 servers here).
final class ListingFirstPageTests: MountTestCase {
    /// The server; its log has a line per answer: time, what (`page TOKEN`, `web first`, `web rest`).
    ///   /bkt?list-type=2&prefix=many/...  2,500 keys under `many/`, 1,000 a page; every page after the first waits
    ///                                     until ROOT/release exists;
    ///   /web/                             nginx's JSON listing of 5,000 files: its first 128 KiB at once, the rest
    ///                                     once ROOT/release exists.
    static let script = """
import hashlib, http.server, json, os, sys, threading, time, urllib.parse
port, root, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()
release = os.path.join(root, "release")
def note(*fields):
    with lock:
        with open(log, "a") as out:
            out.write(" ".join(str(f) for f in fields) + "\\n")
def held():
    while not os.path.exists(release):
        time.sleep(0.05)
class Held(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def head(self, length, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()
    def do_GET(self):
        path, _, query = self.path.partition("?")
        fields = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if path.startswith("/bkt") and fields.get("list-type") == "2":
            token = fields.get("continuation-token")
            if token is not None:
                held()
            start = int(token or 0)
            end, count = min(2500, start + 1000), (2500 if fields.get("prefix") == "many/" else 0)
            end = min(end, count)
            parts = ['<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name>',
                     '<Prefix>%s</Prefix><Delimiter>/</Delimiter>' % fields.get("prefix", ""),
                     '<IsTruncated>%s</IsTruncated>' % ("true" if end < count else "false")]
            if end < count:
                parts.append("<NextContinuationToken>%d</NextContinuationToken>" % end)
            for i in range(start, end):
                parts.append("<Contents><Key>many/photo-%04d.jpg</Key><LastModified>2026-11-01T10:00:00.000Z"
                             "</LastModified><ETag>&quot;%s&quot;</ETag><Size>1</Size></Contents>"
                             % (i, hashlib.md5(str(i).encode()).hexdigest()))
            parts.append("</ListBucketResult>")
            body = "".join(parts).encode()
            self.head(len(body), "application/xml")
            self.wfile.write(body)
            note("%.3f" % time.time(), "page", token or "-")
            return
        if path == "/web/":
            body = json.dumps([{"name": "photo-%04d.jpg" % i, "type": "file", "mtime": "Sun, 01 Nov 2026 10:00:00 GMT",
                                "size": 1} for i in range(5000)]).encode()
            self.head(len(body), "application/json")
            self.wfile.write(body[:128 << 10])
            self.wfile.flush()
            note("%.3f" % time.time(), "web", "first")
            held()
            self.wfile.write(body[128 << 10:])
            note("%.3f" % time.time(), "web", "rest")
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *arguments):
        pass
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True
Server(("127.0.0.1", port), Held).serve_forever()
"""

    func testTheMountReturnsAfterTheFirstPageOfAnObjectStoreListingAndLsWaitsForTheRest() throws {
        let origin = try ScriptedOrigin(script: Self.script, prefix: "held")
        defer { _ = origin.server.stop() }
        try mountWhileHeld(origin, ["s3://bkt/many/", "--s3-endpoint", "http://127.0.0.1:\(origin.port)",
                                    "--s3-no-sign", "--s3-region", "us-east-1"],
                           count: 2500, name: "photo-2499.jpg") {
            XCTAssertEqual(origin.log.filter { $0[1] == "page" }.map { $0[2] }, ["-"], "the first page only, so far")
        }
        XCTAssertEqual(origin.log.filter { $0[1] == "page" }.map { $0[2] }, ["-", "1000", "2000"],
                       "each page asked once, in order")
    }

    func testTheMountReturnsAfterTheFirstBytesOfALongWebListingAndLsWaitsForTheRest() throws {
        let origin = try ScriptedOrigin(script: Self.script, prefix: "held")
        defer { _ = origin.server.stop() }
        try mountWhileHeld(origin, [origin.url("web/")], count: 5000, name: "photo-4999.jpg") {
            XCTAssertEqual(origin.log.filter { $0[1] == "web" }.map { $0[2] }, ["first"],
                           "the first bytes only, so far")
        }
        XCTAssertEqual(origin.log.filter { $0[1] == "web" }.map { $0[2] }, ["first", "rest"], "one listing")
    }

    /// Mounts `arguments` while the server holds its listing back, and checks that the mount returns, that `ls`
    /// of the mount waits, and that it shows all `count` files once the rest is let go. `whileHeld` checks the
    /// server's log just before the release.
    private func mountWhileHeld(_ origin: ScriptedOrigin, _ arguments: [String], count: Int, name: String,
                                whileHeld: () -> Void) throws {
        let release = origin.root + "/release"
        defer { FileManager.default.createFile(atPath: release, contents: Data()) }  // never leave a server held
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(mountpoint)") }
        let mountLog = scratch.path + "/mount.out"
        let mount = try BackgroundProcess(driver.binary, ["mount", mountpoint] + [arguments[0], "--cache", cache]
                                                         + arguments.dropFirst(), logPath: mountLog)
        // Generous: a loaded machine starts a daemon slowly; the listing stays held however long this waits.
        let status = mount.waitForExit(timeout: 60)
        let said = (try? String(contentsOfFile: mountLog, encoding: .utf8)) ?? ""
        XCTAssertEqual(status, 0,
                       "the mount returned, successfully, while the listing was held after its first page: \(said)")
        if status == nil {
            FileManager.default.createFile(atPath: release, contents: Data())
            _ = mount.waitForExit(timeout: 120)
        }
        XCTAssertTrue(driver.isMounted(mountpoint), "mounted: \(said)")
        guard driver.isMounted(mountpoint) else { return }
        driver.record(mountpoint)

        let listed = scratch.path + "/ls.out"
        let reader = try BackgroundProcess("/bin/ls", [mountpoint], logPath: listed)
        let early = reader.waitForExit(timeout: 1.5)
        XCTAssertNil(early, "ls waits while the rest of the listing is held back")
        let shownEarly = ((try? String(contentsOfFile: listed, encoding: .utf8)) ?? "").split(separator: "\n").count
        XCTAssertEqual(shownEarly, 0, "ls showed nothing of a listing not yet whole")
        whileHeld()
        FileManager.default.createFile(atPath: release, contents: Data())
        XCTAssertEqual(reader.waitForExit(timeout: 120), 0, "ls ended once the listing came whole")
        let names = ((try? String(contentsOfFile: listed, encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertEqual(names.count, count, "every file listed")
        XCTAssertEqual(names.last.map(String.init), name)
        print("mount returned while held: \(status.map(String.init) ?? "no"); ls waited: \(early == nil); "
              + "\(names.count) names after the release")
    }
}
