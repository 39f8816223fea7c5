import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 45, case 6: a cap is a cap. With `--cache-max-size` below a file's size, a copy of the file used to start
/// the background fill, which evicted what it had just fetched and fetched it again for ever (the origin sent
/// 4.4 GB in 13 s after a copy through a 24 MiB cap) while `status` said "ETA 1s". Now the file is read through
/// (the cache is its window), never completed, and status says so. Counted from nginx's own access log.
final class CacheCapTests: MountTestCase {
    /// Serves `size` random bytes as `name`, mounts it alone under a 24 MiB cap (everything else default), and
    /// copies it out with `cp`, checking the copy's sha256; the access log counts from the copy on.
    func copyThroughTheCap(_ name: String, size: Int) throws {
        let digest = try origin.serveRandomFile(name, size: size)
        try mount([origin.url(name)], extra: ["--cache-max-size", "24M"])
        origin.clearAccessLog()
        let copy = scratch.path + "/" + name
        let copied = try Shell.run("/bin/cp", [mountpoint + "/" + name, copy], timeout: 300)
        XCTAssertEqual(copied.status, 0, copied.stderr)
        XCTAssertEqual(try Shell.sha256(of: copy), digest)
    }

    func testACopyOfAFileLargerThanTheCapIsReadThroughAndNothingFollows() throws {
        let size = 80 << 20
        try copyThroughTheCap("larger.bin", size: size)

        // A loop sends gigabytes within seconds; a cap that holds sends nothing more. Watched for 8 s (ending
        // early if the bound is broken), so a slow machine only makes the test longer, never wrong.
        let afterCopy = origin.bodyBytesSent(path: "/larger.bin")
        let margin: UInt64 = 8 << 20  // what the last requests of the copy may still have had in flight
        let deadline = Date().addingTimeInterval(8)
        var sent = afterCopy
        while Date() < deadline {
            sent = origin.bodyBytesSent(path: "/larger.bin")
            if sent > afterCopy + margin { break }
            usleep(250_000)
        }
        print("cache cap: a copy of \(size) bytes through a 24 MiB cap: \(afterCopy) bytes sent by its end, \(sent) 8 s later")
        XCTAssertLessThanOrEqual(sent - afterCopy, margin,
                                 "the origin sent \(sent - afterCopy) bytes more in the 8 s after the copy ended")
        XCTAssertLessThanOrEqual(sent, UInt64(size) + margin,
                                 "the origin sent \(sent) bytes in all for one copy of a \(size)-byte file")

        // Status says why the file stays partial, with no ETA, in both forms.
        let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
        let file = try XCTUnwrap(files.first { ($0["name"] as? String) == "larger.bin" }, "\(files)")
        XCTAssertEqual(file["state"] as? String, "read through", "\(file)")
        XCTAssertNil(file["eta_seconds"] as? Double, "\(file)")
        XCTAssertTrue((file["note"] as? String)?.contains("larger than --cache-max-size") == true, "\(file)")
        let text = try driver.run(["status", "--mount", mountpoint])
        XCTAssertEqual(text.status, 0, text.stderr)
        let line = try XCTUnwrap(text.stdout.split(separator: "\n").first { $0.hasPrefix("larger.bin") }, text.stdout)
        print("cache cap: status said:\n\(text.stdout)")
        XCTAssertTrue(line.contains("read through"), text.stdout)
        XCTAssertTrue(text.stdout.contains("larger than --cache-max-size"), text.stdout)
    }

    // A file that fits is still completed in the background (default `--prefetch use`), each byte fetched once.
    func testACopyOfAFileThatFitsTheCapGetsItCompleted() throws {
        let size = 20 << 20
        try copyThroughTheCap("fits.bin", size: size)
        let path = mountpoint + "/fits.bin"
        let deadline = Date().addingTimeInterval(30)
        func state() throws -> String {
            try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.state", path]).stdout
        }
        while try state() != "complete", Date() < deadline { usleep(200_000) }
        XCTAssertEqual(try state(), "complete")
        XCTAssertEqual(bytesFetched("/fits.bin"), UInt64(size), "each byte once")
    }

    // Two files that each fit the cap but not together, both completed in the background (`--prefetch all`, the
    // point here): their fills used to take each other's blocks for ever. Now each pass stops when the only room
    // left is what was used since it began: the origin sends each byte at most once, then nothing.
    func testFillsOfFilesThatFitOnlyAloneStopInsteadOfTakingEachOthersBlocks() throws {
        let size = 16 << 20
        let digests = try ["first.bin", "second.bin"].map { try origin.serveRandomFile($0, size: size) }
        origin.clearAccessLog()
        try mount([origin.url("first.bin"), origin.url("second.bin")],
                  extra: ["--cache-max-size", "24M", "--prefetch", "all"])
        func sent() -> UInt64 { bytesFetched("/first.bin") + bytesFetched("/second.bin") }
        // Until the fills have settled (the count still for 2 s), at most 60 s; a loop never settles.
        let deadline = Date().addingTimeInterval(60)
        var last = sent(), stillSince = Date()
        while Date() < deadline && Date().timeIntervalSince(stillSince) < 2 && last <= 2 * UInt64(size) + (8 << 20) {
            usleep(250_000)
            let now = sent()
            if now != last { (last, stillSince) = (now, Date()) }
        }
        usleep(4_000_000)  // and then nothing more
        let total = sent()
        print("cache cap: two fills of \(size) bytes each through a 24 MiB cap: the origin sent \(total) bytes")
        XCTAssertLessThanOrEqual(total, 2 * UInt64(size), "each byte at most once")
        XCTAssertEqual(total, last, "nothing after the fills settled")
        let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
        XCTAssertFalse(files.contains { $0["state"] as? String == "downloading" }, "\(files)")
        XCTAssertTrue(files.contains { ($0["note"] as? String)?.contains("--cache-max-size") == true }, "\(files)")
        // Both still read right, through the cap.
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/first.bin"), digests[0])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/second.bin"), digests[1])
    }

    func testPinningAFileLargerThanTheCapIsRefusedNamingTheFix() throws {
        try origin.serveRandomFile("pinned-large.bin", size: 32 << 20)
        try mount([origin.url("pinned-large.bin")], extra: ["--cache-max-size", "24M"])
        origin.clearAccessLog()
        let pinned = try driver.run(["pin", "pinned-large.bin", "--mount", mountpoint])
        print("cache cap: rangefs pin said: \(pinned.stderr)")
        XCTAssertNotEqual(pinned.status, 0, pinned.stdout)
        XCTAssertTrue(pinned.stderr.contains("pinned-large.bin") && pinned.stderr.contains("--cache-max-size"),
                      pinned.stderr)
        sleep(2)
        XCTAssertEqual(origin.bodyBytesSent(path: "/pinned-large.bin"), 0, "a refused pin fetches nothing")
    }
}
