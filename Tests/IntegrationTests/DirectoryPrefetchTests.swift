import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 36, directory-aware prefetch: a reader going through a listed directory in listing order finds the next
/// files fetched ahead of it (their opens and reads send nothing); a reader that jumps around triggers nothing;
/// fetching ahead stays within its bounds. Every count is the server's own log.
final class DirectoryPrefetchTests: MountTestCase {
    /// `count` files of 4-64 KiB in `folder` under nginx's JSON-listed `/fast/`, named `f000.bin`...; their bytes.
    func makeFolder(_ folder: String, count: Int) throws -> [[UInt8]] {
        try FileManager.default.createDirectory(atPath: origin.path("fast/" + folder), withIntermediateDirectories: true)
        return try (0..<count).map { index in
            let bytes = pseudoRandomBytes(count: 4096 + (index * 7919) % (60 << 10), seed: UInt64(index + 1))
            try origin.serve("fast/\(folder)/" + Self.name(index), bytes: bytes)
            return bytes
        }
    }

    static func name(_ index: Int) -> String { String(format: "f%03d.bin", index) }

    /// The requests nginx logged for each file of `folder`, by index.
    func requestsPerFile(_ folder: String) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for line in origin.accessLog() where line.path.hasPrefix("/fast/\(folder)/f") {
            if let index = Int(line.path.dropFirst("/fast/\(folder)/f".count).prefix(3)) { counts[index, default: 0] += 1 }
        }
        return counts
    }

    // (1) Files read in listing order: the ones after are requested before the reader opens them, and opening and
    //     reading them then sends nothing: every file costs exactly one request in all.
    func testAReaderInListingOrderFindsTheNextFilesFetchedAhead() throws {
        let files = try makeFolder("ordered", count: 60)
        try mount([origin.url("fast/ordered/")])
        for index in 0..<10 {
            XCTAssertEqual(try fileBytes(mountpoint + "/" + Self.name(index), offset: 0, count: 1 << 20), files[index])
        }
        // Nothing of files 10... was asked for by the reader yet: any request for them is a fetch ahead.
        let deadline = Date().addingTimeInterval(30)
        while requestsPerFile("ordered").keys.filter({ $0 >= 10 }).isEmpty && Date() < deadline { usleep(20_000) }
        let ahead = requestsPerFile("ordered").keys.filter { $0 >= 10 }.sorted()
        XCTAssertFalse(ahead.isEmpty, "no file after the reader's was requested ahead of it")
        for index in 10..<60 {
            XCTAssertEqual(try fileBytes(mountpoint + "/" + Self.name(index), offset: 0, count: 1 << 20), files[index],
                           Self.name(index))
        }
        try driver.unmount(mountpoint, cache: cache)
        let counts = requestsPerFile("ordered")
        XCTAssertEqual(counts.count, 60, "every file was fetched")
        let twice = counts.filter { $0.value != 1 }.sorted { $0.key < $1.key }
        XCTAssertTrue(twice.isEmpty, "files requested more than once (the open or a read of a file fetched ahead asked again): \(twice)")
        print("fetched ahead before file 10 was opened: \(ahead.count) files, \(ahead.first ?? -1)...\(ahead.last ?? -1)")
    }

    // (2) A reader that jumps around (every 37th file of 200, wrapping: never two opens within 36 files of each
    //     other, forward) triggers nothing: only the files it opens are requested.
    func testAReaderThatJumpsAroundTriggersNoPrefetch() throws {
        let files = try makeFolder("jumping", count: 200)
        try mount([origin.url("fast/jumping/")])
        let order = (0..<60).map { $0 * 37 % 200 }
        for index in order {
            XCTAssertEqual(try fileBytes(mountpoint + "/" + Self.name(index), offset: 0, count: 1 << 20), files[index])
        }
        try driver.unmount(mountpoint, cache: cache)
        let requested = Set(requestsPerFile("jumping").keys)
        XCTAssertEqual(requested.subtracting(order).sorted(), [], "files requested that the reader never opened")
        XCTAssertEqual(requested, Set(order))
    }

    // (3) `xargs -P 8 -n 20` readers: 8 readers 20 files apart, each in order. The opens go in the order of 8
    //     readers taking turns (one thread, so that the order is the same in every run): from the fifth file of a
    //     reader's batch on, each file is requested before its open (the reader waits for that event, up to a
    //     minute in all: main never fetched it ahead). Reading stops after the 8 batches: nothing after them is
    //     requested beyond the largest window (64 files), and no file twice.
    func testEightReadersTwentyFilesApartFindTheirNextFilesFetchedAhead() throws {
        let files = try makeFolder("readers", count: 300)
        try mount([origin.url("fast/readers/")])
        let deadline = Date().addingTimeInterval(60)
        var requestedBeforeOpen = 0, expected = 0
        for offset in 0..<20 {
            for reader in 0..<8 {
                let index = reader * 20 + offset
                if offset >= 4 {
                    expected += 1
                    while requestsPerFile("readers")[index] == nil && Date() < deadline { usleep(5_000) }
                    if requestsPerFile("readers")[index] != nil { requestedBeforeOpen += 1 }
                }
                XCTAssertEqual(try fileBytes(mountpoint + "/" + Self.name(index), offset: 0, count: 1 << 20),
                               files[index], Self.name(index))
            }
        }
        // What the last fetches ahead ask for is logged once they end: waits for the log to stay still.
        var last = -1
        while origin.accessLog().count != last { last = origin.accessLog().count; usleep(500_000) }
        try driver.unmount(mountpoint, cache: cache)
        let counts = requestsPerFile("readers")
        XCTAssertEqual(requestedBeforeOpen, expected, "files past the fourth of a reader's batch requested before their open")
        XCTAssertEqual(Set(0..<160).subtracting(counts.keys).sorted(), [], "files read but never requested")
        XCTAssertEqual(counts.filter { $0.value != 1 }.keys.sorted(), [], "files requested more than once")
        let beyond = counts.keys.filter { $0 >= 160 }.sorted()
        XCTAssertLessThanOrEqual(beyond.last ?? 159, 159 + 64, "a file requested beyond the largest window: \(beyond)")
        print("8 readers: \(requestedBeforeOpen) of \(expected) files requested before their open; \(beyond.count) after the last read")
    }

    // (4) Real `xargs -P 8 -n 20` readers (sha256sum), as fast as they go: every file reads right and is requested once
    //     (a file fetched ahead for one cursor is never fetched again for another, nor by its own open).
    func testXargsWithEightReadersReadsEveryFileOnce() throws {
        let files = try makeFolder("xargs", count: 300)
        try mount([origin.url("fast/xargs/")])
        let result = try Shell.run("/bin/sh", ["-c", "cd \"$1\" && ls | xargs -P 8 -n 20 sha256sum --", "sh", mountpoint],
                                   timeout: 300)
        XCTAssertEqual(result.status, 0, result.stderr)
        let digests = Dictionary(result.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count == 2 ? (String(fields[1]), String(fields[0])) : nil
        }, uniquingKeysWith: { first, _ in first })
        for index in 0..<300 {
            XCTAssertEqual(digests[Self.name(index)], Shell.sha256(of: Data(files[index])), Self.name(index))
        }
        try driver.unmount(mountpoint, cache: cache)
        let counts = requestsPerFile("xargs")
        XCTAssertEqual(counts.count, 300, "every file was requested")
        XCTAssertEqual(counts.filter { $0.value != 1 }.sorted { $0.key < $1.key }.map(\.key), [],
                       "files requested more than once")
    }

    /// A JSON-listed directory `/d/` of `argv[2]` files of 8 KiB (`f0000.bin`...) whose answers for files from
    /// index `argv[3]` on are held until `/release` is asked for. Each request is logged when it arrives
    /// (`start NAME`) and just before its answer goes out (`end NAME`), to `argv[4]`.
    static let holdingServer = """
    import http.server, json, sys, threading
    port, count, hold_from, log = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    SIZE = 8192
    names = ['f%04d.bin' % i for i in range(count)]
    released = threading.Event()
    lock = threading.Lock()
    def note(line):
        with lock:
            with open(log, 'a') as f:
                f.write(line + '\\n')
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'
        disable_nagle_algorithm = True
        def send(self, status, body, headers):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            if self.path == '/release':
                released.set()
                return self.send(200, b'ok', {})
            if self.path == '/d/':
                listing = [{'name': n, 'type': 'file', 'mtime': 'Wed, 25 Nov 2026 10:00:00 GMT', 'size': SIZE}
                           for n in names]
                return self.send(200, json.dumps(listing).encode(), {'Content-Type': 'application/json'})
            name = self.path[len('/d/'):]
            if not self.path.startswith('/d/') or name not in names:
                return self.send(404, b'', {})
            index = int(name[1:5])
            note('start ' + name)
            if index >= hold_from:
                released.wait()
            body = bytes([index % 251]) * SIZE
            headers = {'ETag': '"%d"' % index, 'Last-Modified': 'Wed, 25 Nov 2026 10:00:00 GMT'}
            status, start, end = 200, 0, SIZE - 1
            rng = self.headers.get('Range')
            if rng and rng.startswith('bytes='):
                a, b = rng[6:].split('-')
                start, end = int(a), min(SIZE - 1, int(b) if b else SIZE - 1)
                status = 206
                headers['Content-Range'] = 'bytes %d-%d/%d' % (start, end, SIZE)
            # Noted before the answer goes out: once it has, rangefs may start the next fetch on another
            # connection, whose start must not be counted beside this one (the bound is exact).
            note('end ' + name)
            self.send(status, body[start:end + 1], headers)
        def log_message(self, *args):
            pass
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 256
        daemon_threads = True
    Server(('127.0.0.1', port), Handler).serve_forever()
    """

    // (5) The bounds: with the answers for the files after the reader's held, no more fetches ahead run at once
    //     than the background connections less two (16 - 2), and once released, no more files are fetched ahead of
    //     the last one opened than the largest window (64).
    func testFetchingAheadStaysWithinItsBounds() throws {
        let log = scratch.path + "/holding.log"
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", ["-c", Self.holdingServer, String(port), "400", "30", log])
        }
        defer { server.stop() }
        /// The log's lines so far, as (event, index).
        func events() -> [(start: Bool, index: Int)] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ")
                guard fields.count == 2, let index = Int(fields[1].dropFirst().prefix(4)) else { return nil }
                return (fields[0] == "start", index)
            }
        }
        /// The most requests running at once, and the files requested.
        func summary() -> (most: Int, requested: Set<Int>) {
            var running = 0, most = 0
            var requested = Set<Int>()
            for event in events() {
                running += event.start ? 1 : -1
                most = max(most, running)
                if event.start { requested.insert(event.index) }
            }
            return (most, requested)
        }
        /// Waits until the log has not grown for two seconds (at most `limit` seconds).
        func waitForQuiet(limit: Double = 60) {
            var last = -1, since = Date()
            let deadline = Date().addingTimeInterval(limit)
            while Date() < deadline {
                let count = events().count
                if count != last { (last, since) = (count, Date()) }
                if Date().timeIntervalSince(since) > 2 { return }
                usleep(50_000)
            }
        }
        try mount(["http://127.0.0.1:\(port)/d/"])
        for index in 0..<30 {
            let bytes = try fileBytes(mountpoint + String(format: "/f%04d.bin", index), offset: 0, count: 1 << 20)
            XCTAssertEqual(bytes, [UInt8](repeating: UInt8(index % 251), count: 8192))
        }
        waitForQuiet()
        let held = summary()
        let heldAhead = held.requested.filter { $0 >= 30 }
        XCTAssertFalse(heldAhead.isEmpty, "nothing was fetched ahead of the reader")
        XCTAssertLessThanOrEqual(held.most, 14, "fetches ahead running at once")
        _ = try Shell.run("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/release"])
        waitForQuiet()
        let after = summary()
        let ahead = after.requested.filter { $0 >= 30 }
        XCTAssertLessThanOrEqual(after.most, 14, "fetches ahead running at once")
        XCTAssertLessThanOrEqual(ahead.count, 64, "files fetched ahead of the last one opened (29)")
        XCTAssertEqual(ahead.sorted(), Array(30..<(30 + ahead.count)), "the next files, in order")
        print("held: \(heldAhead.count) files, at most \(held.most) at once; after the release \(ahead.count) files ahead")
    }
}
