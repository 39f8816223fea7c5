import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 29's metrics: `--metrics ADDR:PORT` serves Prometheus text whose values match the servers' access logs.
final class MetricsTests: MountTestCase {
    /// A port nothing listens on now (the kernel's choice for a socket bound to port 0).
    func freePort() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(probe, $0, length) == 0, getsockname(probe, $0, &length) == 0 else {
                    throw TestSupportError("cannot find a free port")
                }
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The value of the series `name{labels}` in `text`, or nil when it is not there.
    func value(_ text: String, _ series: String) -> UInt64? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { UInt64($0.split(separator: " ").last!) }
    }

    func scrape(_ port: Int, path: String = "/metrics") throws -> ProcessResult {
        try Shell.run("/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)\(path)"])
    }

    func testTheEndpointsCountersMatchTheAccessLogsOfACopy() throws {
        let mirror = try NginxOrigin()
        defer { mirror.stop() }
        let size = 24 << 20
        let expected = try origin.serveRandomFile("metered.bin", size: size)
        try FileManager.default.copyItem(atPath: origin.path("metered.bin"), toPath: mirror.path("metered.bin"))
        origin.clearAccessLog()
        let port = try freePort()
        try mount(["metered.bin=\(origin.url("metered.bin")) \(mirror.url("metered.bin")) sha256=\(expected)"],
                  extra: ["--metrics", "127.0.0.1:\(port)"])
        let copy = scratch.path + "/copy"
        try Shell.run("/bin/cp", [mountpoint + "/metered.bin", copy])
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        usleep(300_000)  // nginx logs a response once it is sent

        let scraped = try scrape(port)
        XCTAssertTrue(scraped.stdout.hasSuffix("\n200"), scraped.stdout)
        let text = scraped.stdout
        XCTAssertTrue(text.contains("# TYPE rangefs_fetched_bytes_total counter"), text)
        let fromOrigin = value(text, "rangefs_fetched_bytes_total{role=\"origin\",source=\"http://127.0.0.1:\(origin.port)\"}")
        let fromMirror = value(text, "rangefs_fetched_bytes_total{role=\"mirror\",source=\"http://127.0.0.1:\(mirror.port)\"}")
        XCTAssertEqual(fromOrigin, dataBytes(origin, "/metered.bin"), text)
        XCTAssertEqual(fromMirror, dataBytes(mirror, "/metered.bin"), text)
        XCTAssertEqual((fromOrigin ?? 0) + (fromMirror ?? 0), UInt64(size), "each byte fetched once")
        let hits = value(text, "rangefs_read_bytes_total{result=\"hit\"}") ?? 0
        let misses = value(text, "rangefs_read_bytes_total{result=\"miss\"}") ?? 0
        XCTAssertEqual(hits + misses, UInt64(size), "every byte the copy read counted once: \(text)")
        XCTAssertGreaterThan(misses, 0, "the first read had to wait for the network")
        XCTAssertEqual(value(text, "rangefs_evicted_bytes_total"), 0)
        XCTAssertNil(value(text, "rangefs_fetch_errors_total{kind=\"connection_refused\"}"))

        // The copy completed the file, and its digest check counts once it has run.
        var checks: UInt64?
        for _ in 0..<100 where checks == nil {
            checks = value(try scrape(port).stdout, "rangefs_digest_checks_total{result=\"verified\"}")
            usleep(100_000)
        }
        XCTAssertEqual(checks, 1)

        // A complete file opened again once it is committed (0.5 s): the kernel reads it itself, and the counter
        // says so.
        sleep(1)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/metered.bin"), expected)
        XCTAssertGreaterThanOrEqual(value(try scrape(port).stdout, "rangefs_passthrough_opens_total") ?? 0, 1)

        // Both servers go down: the next fetch's failure is counted by kind. (With one of them left up, which of
        // the two a read asks depends on their measured speeds, so a refused connection might never be tried.)
        let evicted = try driver.run(["evict", "metered.bin", "--mount", mountpoint])
        XCTAssertEqual(evicted.status, 0, evicted.stderr)
        mirror.halt()
        origin.halt()
        XCTAssertEqual(readError(mountpoint + "/metered.bin", offset: 0, count: 65536), EIO)
        let after = try scrape(port).stdout
        XCTAssertNotNil(value(after, "rangefs_fetch_errors_total{kind=\"connection_refused\"}"), after)

        XCTAssertTrue(try scrape(port, path: "/").stdout.hasSuffix("\n404"))
    }

    /// Clients that hang (connected, half a request sent, never reading) hold up no other scrape.
    func testAHangingClientHoldsUpNoScrape() throws {
        try origin.serveRandomFile("small.bin", size: 1 << 20)
        let port = try freePort()
        try mount([origin.url("small.bin")], extra: ["--metrics", "127.0.0.1:\(port)"])
        var hanging: [Int32] = []
        defer { hanging.forEach { close($0) } }
        for _ in 0..<3 {
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            XCTAssertEqual(connected, 0)
            _ = "GET /metr".withCString { send(client, $0, 9, 0) }
            hanging.append(client)
        }
        usleep(200_000)
        let started = Date()
        let scraped = try scrape(port)
        XCTAssertTrue(scraped.stdout.hasSuffix("\n200"), scraped.stdout)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "a scrape waited behind clients that hang")
    }

    /// Issue 39: the message of an EIO, which the kernel cannot pass on, is logged once however often a program
    /// reads the broken file, and each EIO the adapter answers is counted.
    func testAnEIOsMessageIsLoggedOnceAndEveryEIOIsCounted() throws {
        try origin.serveRandomFile("broken.bin", size: 1 << 20)
        let port = try freePort()
        let daemon = try startForeground([origin.url("broken.bin")], extra: ["--metrics", "127.0.0.1:\(port)"])
        let path = mountpoint + "/broken.bin"
        let descriptor = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        unlink(origin.path("broken.bin"))  // the server answers 404 from now on: every read of it fails
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<10 {
            XCTAssertEqual(Glibc.pread(descriptor, &buffer, buffer.count, 0), -1)
            XCTAssertEqual(errno, EIO)
        }
        let counted = value(try scrape(port).stdout, "rangefs_io_errors_total") ?? 0
        XCTAssertGreaterThanOrEqual(counted, 10, "each EIO answered is counted")
        let log = (try? String(contentsOfFile: scratch.path + "/daemon.log", encoding: .utf8)) ?? ""
        let lines = log.split(separator: "\n").filter { $0.contains("a program was answered EIO: ") }
        XCTAssertEqual(lines.count, 1, log)
        XCTAssertTrue(lines.first?.contains("404") == true, "the line says why: \(lines)")
        _ = daemon  // the foreground daemon, which the unmount in tearDown stops
    }

    /// Issue 47: the kernel sends a sequential reader's readahead as READs of a whole 1 MiB window (256 pages,
    /// the most it allows). Capped at 255 pages, each window came as two READs, one of them a single page: a cold
    /// copy of 32 MiB took about half as many READs again. Counted by the daemon's own READ counter.
    func testAColdCopyIsReadInREADsOfOneMebibyte() throws {
        let size = 32 << 20
        let expected = try origin.serveRandomFile("windows.bin", size: size)
        let port = try freePort()
        try mount([origin.url("windows.bin")], extra: ["--metrics", "127.0.0.1:\(port)"])
        let copy = scratch.path + "/copy"
        try Shell.run("/bin/cp", [mountpoint + "/windows.bin", copy])
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        let text = try scrape(port).stdout
        let bytes = (value(text, "rangefs_read_bytes_total{result=\"hit\"}") ?? 0)
            + (value(text, "rangefs_read_bytes_total{result=\"miss\"}") ?? 0)
        let reads = (value(text, "rangefs_reads_total{result=\"hit\"}") ?? 0)
            + (value(text, "rangefs_reads_total{result=\"miss\"}") ?? 0)
        XCTAssertEqual(bytes, UInt64(size), "every byte the copy read came through the daemon once: \(text)")
        // 32 READs of 1 MiB, and a few smaller ones while the kernel's window grows to 1 MiB.
        XCTAssertLessThanOrEqual(reads, 40, "\(reads) READs for \(size >> 20) MiB: the kernel's READs are not 1 MiB")
    }

    /// Issue 47: a copy right after a cold one, on the same mount, never reaches the daemon: the open of a file
    /// whose version the kernel already holds keeps its pages (FOPEN_KEEP_CACHE), or passes the file through, and
    /// the copy runs at the page cache's speed, as a copy from a tmpfs does. Counted by the daemon's READ counter
    /// and the origin's access log; no timing. Passthrough is off: as root, the second open could pass the file
    /// through once it is committed, which would hide whether the kernel kept its pages (a mount without root has
    /// only those).
    func testAWarmCopyOnTheSameMountSendsTheDaemonNoREAD() throws {
        let size = 16 << 20
        let expected = try origin.serveRandomFile("twice.bin", size: size)
        let port = try freePort()
        try mount([origin.url("twice.bin")], extra: ["--metrics", "127.0.0.1:\(port)", "--passthrough", "off"])
        let copy = scratch.path + "/copy"
        try Shell.run("/bin/cp", [mountpoint + "/twice.bin", copy])
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        let reads = { (text: String) in
            (self.value(text, "rangefs_reads_total{result=\"hit\"}") ?? 0)
                + (self.value(text, "rangefs_reads_total{result=\"miss\"}") ?? 0)
        }
        let cold = reads(try scrape(port).stdout)
        XCTAssertGreaterThan(cold, 0, "the cold copy is read through the daemon")
        // Every transfer of the cold copy has ended (and nginx has logged it) before the access log is counted.
        let deadline = Date().addingTimeInterval(30)
        func state() throws -> String {
            try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.state", mountpoint + "/twice.bin"])
                .stdout
        }
        while try state() != "complete", Date() < deadline { usleep(100_000) }
        XCTAssertEqual(try state(), "complete")
        usleep(500_000)
        let requests = origin.accessLog().count
        try Shell.run("/bin/cp", [mountpoint + "/twice.bin", copy])
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        let text = try scrape(port).stdout
        XCTAssertEqual(reads(text), cold, "the warm copy sent READs to the daemon: \(text)")
        XCTAssertEqual(origin.accessLog().count, requests, "the warm copy asked the origin again")
    }

    func testABadMetricsAddressIsNamedWithItsFix() throws {
        let result = try driver.run(["mount", mountpoint, origin.url("x.bin"), "--cache", cache, "--metrics", "localhost:99999"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("invalid --metrics 'localhost:99999'; give ADDR:PORT or PORT"), result.stderr)
    }
}
