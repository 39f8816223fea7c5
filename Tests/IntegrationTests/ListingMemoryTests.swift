import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 46: listed entries in bounded memory. A directory of 100,000 files listed by nginx's JSON autoindex costs
/// the daemon at most a bounded number of bytes of RSS per entry once `ls -l` has shown it (main: about 680), and at
/// its peak (VmHWM).
final class ListingMemoryTests: MountTestCase {
    /// The daemon's resident memory in bytes (`VmRSS`), or its peak so far (`VmHWM`).
    func residentBytes(_ pid: pid_t, _ field: String = "VmRSS") throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let kib = status.split(separator: "\n").first { $0.hasPrefix(field + ":") }
            .flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } }
        return try XCTUnwrap(kib, "\(field) in /proc/\(pid)/status") * 1024
    }

    func testAHundredThousandListedFilesCostAtMost500BytesEach() throws {
        let count = 100_000
        // 1-byte files named as a camera names them (16 bytes: longer than a string kept inline), made by python:
        // 100,000 creates from Swift's FileManager take much longer on this machine.
        let folder = origin.root + "/fast/many"
        let make = "import os, sys\nos.makedirs(sys.argv[1], exist_ok=True)\n"
            + "for i in range(int(sys.argv[2])):\n    open(os.path.join(sys.argv[1], 'photo-%06d.jpg' % i), 'wb').write(b'x')\n"
        let made = try Shell.run("/usr/bin/python3", ["-c", make, folder, String(count)], timeout: 300)
        XCTAssertEqual(made.status, 0, made.stderr)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The folder is listed on its first visit, not at mount, so the mount's own memory is measured apart.
        // Steady listings: a refresh in the middle of a slow `ls -l` is another measurement.
        try mount([origin.url("fast/")], extra: Self.steadyListings)
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        let before = try residentBytes(pid)

        let listed = try Shell.run("/bin/ls", ["-l", mountpoint + "/many"], timeout: 600)
        XCTAssertEqual(listed.status, 0, listed.stderr.suffix(300).description)
        let lines = listed.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, count + 1, "a total line and every file")
        XCTAssertTrue(lines.last?.hasSuffix(" photo-099999.jpg") == true && lines.last?.contains(" 1 ") == true,
                      "the last file, of 1 byte: \(lines.last.map(String.init) ?? "")")
        XCTAssertEqual(try statFile(mountpoint + "/many/photo-012345.jpg").st_size, 1)
        let after = try residentBytes(pid)
        let peak = try residentBytes(pid, "VmHWM")
        let perEntry = (after - before) / count
        let peakPerEntry = (peak - before) / count
        print("daemon RSS: \(before) bytes before the listing, \(after) after ls -l: \(perEntry) bytes per entry; "
              + "peak \(peak): \(peakPerEntry) bytes per entry")
        XCTAssertLessThanOrEqual(perEntry, 500, "daemon RSS per listed entry after ls -l (main: about 680)")
        // The peak: the listing's JSON, read to records and let go before the catalog grows (before: the JSON, an
        // entry per child, a set of names and the catalog at once, 517 bytes an entry in a release build).
        XCTAssertLessThanOrEqual(peakPerEntry, 400, "daemon peak RSS (VmHWM) per listed entry")
    }
}
