import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 36, "an open answers as soon as it can": the probe of a listed file being opened (a request for its first
/// 256 KiB, FirstBytes.swift) answers the open at its head while its body streams on into the file's first blocks,
/// and a probe whose answer came whole never drops its connection.
final class OpenProbeTests: MountTestCase {
    static let probeBytes = 256 << 10

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
        // Files the probe's 206 brings exactly 256 KiB of; files a 200 brings whole in exactly 256 KiB.
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
    func openOneAfterTheOther(_ folder: String, status: String) throws -> [[String]] {
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
            while cachedBytes(path) != Self.probeBytes && Date() < deadline { usleep(50_000) }
            XCTAssertEqual(cachedBytes(path), Self.probeBytes, "the probe's bytes are cached")
        }
        let lines = connectionLog(origin, folder)
        XCTAssertEqual(lines.map { [$0[2], $0[3]] }, [[status, "/\(folder)/a.bin"], [status, "/\(folder)/b.bin"]],
                       "one request per file, its probe: \(lines)")
        return lines
    }

    /// A 206 that brings the probe's whole range (a file of 256 KiB or more) ends by itself: the next file's
    /// probe goes out on the same connection.
    func testAProbeAnsweredWithItsWholeRangeKeepsItsConnection() throws {
        let lines = try openOneAfterTheOther("ranged", status: "206")
        guard lines.count == 2 else { return }
        XCTAssertEqual(lines[1][0], lines[0][0], "the second probe reuses the first one's connection: \(lines)")
        XCTAssertEqual(Int(lines[1][1]), Int(lines[0][1]).map { $0 + 1 }, "the next request on it: \(lines)")
    }

    /// A 200 (the server ignores Range) whose whole body is exactly the probe's 256 KiB ends by itself too: it
    /// was cut on its last byte, and the next request paid a new connection.
    func testAWholeFileAnswerOfExactlyTheProbesSizeKeepsItsConnection() throws {
        let lines = try openOneAfterTheOther("whole", status: "200")
        guard lines.count == 2 else { return }
        XCTAssertEqual(lines[1][0], lines[0][0], "the second probe reuses the first one's connection: \(lines)")
        XCTAssertEqual(Int(lines[1][1]), Int(lines[0][1]).map { $0 + 1 }, "the next request on it: \(lines)")
    }
}
