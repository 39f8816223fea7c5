import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 35, case 6: what `ls -ls`, `stat` and `du` show in a listed directory. A file read whole shows its cached
/// bytes at once, though the kernel keeps a listed file's attributes for the listing's minute.
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
}
