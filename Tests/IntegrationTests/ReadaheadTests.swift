import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 36's readahead proportionate to use, with the default options, counted from nginx's access log: a program
/// that reads the first megabyte of a big file, or a few headers and the end (a prober), costs about what it read.
/// (That a copy still gets the whole window is ReadaheadWindowTests', and the bench's cold cp.)
final class ReadaheadTests: MountTestCase {
    let mebibyte: UInt64 = 1 << 20

    /// A file of 512 MiB that takes no room: nginx serves a sparse file's holes as zeros.
    func serveSparseFile(_ name: String) throws -> String {
        let path = origin.path(name)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        XCTAssertEqual(truncate(path, 512 << 20), 0, String(cString: strerror(errno)))
        return mountpoint + "/" + name
    }

    /// Waits until the mount has nothing in flight for `name` (no transfer running or queued, as `rangefs status`
    /// tells) and nginx's log stayed the same over one more status call, so that what is counted is all that was
    /// fetched. nginx writes a line when its answer is complete.
    func waitUntilQuiet(_ name: String) throws {
        var lastLog: [AccessLogLine]?
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let files = try statusJSON()["files"] as? [[String: Any]] ?? []
            let state = files.first { $0["name"] as? String == name }?["state"] as? String
            let log = origin.accessLog()
            if state != "downloading" && state != "queued" && log == lastLog { return }
            lastLog = state == "downloading" || state == "queued" ? nil : log
            usleep(100_000)
        }
        XCTFail("transfers of \(name) still running after 120 s")
    }

    /// The bytes of `path` nginx was asked for in Range requests, and the body bytes it sent, without the
    /// mount-time probes.
    func fetched(_ path: String) -> (asked: UInt64, sent: UInt64) {
        let lines = origin.accessLog().filter { $0.path == path && $0.range != "bytes=0-0" }
        let asked = lines.reduce(UInt64(0)) { total, line in
            let bounds = line.range.dropFirst("bytes=".count).split(separator: "-").compactMap { UInt64($0) }
            return total + (bounds.count == 2 ? bounds[1] - bounds[0] + 1 : line.bodyBytes)
        }
        return (asked, lines.reduce(0) { $0 + $1.bodyBytes })
    }

    // `head -c 1000000` of a fresh 512 MiB file makes the origin send at most 4 MiB, and rangefs ask for no more,
    // counted once the mount is quiet (2cbae5a: 15 to 33 MiB sent and 35 MiB asked for, as the window doubled per
    // READ up to 32 MiB; transfers nobody wanted any more were dropped when head closed the file).
    func testHeadOfAFreshBigFileFetchesAtMostFourMebibytes() throws {
        let file = try serveSparseFile("head.bin")
        try mount([origin.url("head.bin")])
        origin.clearAccessLog()
        let head = try Shell.run("/usr/bin/head", ["-c", "1000000", file], stdoutFile: scratch.path + "/head.out")
        XCTAssertEqual(head.status, 0, head.stderr)
        XCTAssertEqual(try statFile(scratch.path + "/head.out").st_size, 1_000_000)
        try waitUntilQuiet("head.bin")
        let (asked, sent) = fetched("/head.bin")
        XCTAssertGreaterThanOrEqual(sent, 1_000_000, "the origin sent what head read")
        XCTAssertLessThanOrEqual(sent, 4 * mebibyte, "head -c 1000000 made the origin send \(sent) bytes")
        XCTAssertLessThanOrEqual(asked, 4 * mebibyte, "head -c 1000000 made rangefs ask for \(asked) bytes: "
                                 + origin.accessLog().map(\.range).joined(separator: " "))
    }

    // A prober's reads (a header, a little more of it, then the index at the end and a seek back before it) make
    // the origin send at most 2 MiB of a fresh 512 MiB file (2cbae5a: 2.6 MiB; the kernel alone asks for about
    // 0.8 MiB of it).
    func testAProbersReadsAtTheStartAndTheEndFetchLittle() throws {
        let file = try serveSparseFile("probed.bin")
        try mount([origin.url("probed.bin")])
        origin.clearAccessLog()
        let size = 512 << 20
        let descriptor = open(file, O_RDONLY)  // one open, as a prober makes
        XCTAssertGreaterThanOrEqual(descriptor, 0, String(cString: strerror(errno)))
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        for (offset, count) in [(0, 4096), (4096, 65536), (69632, 32768), (size - 65536, 65536),
                                (size - (1 << 20), 8192)] {
            XCTAssertEqual(Glibc.pread(descriptor, &buffer, count, off_t(offset)), count, "read at \(offset)")
        }
        close(descriptor)
        try waitUntilQuiet("probed.bin")
        let (asked, sent) = fetched("/probed.bin")
        XCTAssertLessThanOrEqual(sent, 2 * mebibyte, "the probe made the origin send \(sent) bytes")
        XCTAssertLessThanOrEqual(asked, 2 * mebibyte, "the probe made rangefs ask for \(asked) bytes: "
                                 + origin.accessLog().map(\.range).joined(separator: " "))
    }
}
