import Foundation
import Glibc
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 35, case 5: `rangefs verify NAME` on a file of a listed directory, after a clean remount and before
/// anything looked the file up, checks the blocks the cache holds, sends no request, and leaves the file whole.
final class VerifyAfterRemountTests: MountTestCase {
    func testVerifyOfAListedFileAfterARemountChecksItsBlocksSendsNoRequestAndKeepsIt() throws {
        // nginx's HTML autoindex (`/listed/`): exact sizes, dates to the minute, no validators in the listing.
        let folder = origin.root + "/listed"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let size = (1 << 20) + 1000  // 17 blocks of 64 KiB, the last one short
        try Shell.run("/usr/bin/head", ["-c", String(size), "/dev/urandom"], stdoutFile: folder + "/kept.bin")
        try Data("another file\n".utf8).write(to: URL(fileURLWithPath: folder + "/other.txt"))
        let expected = try Shell.sha256(of: folder + "/kept.bin")

        try mount([origin.url("listed/")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/kept.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)

        // The same cache, no URLs: the saved directory URL is listed again, the file is not looked up.
        let log = scratch.path + "/rangefs.log"
        try mount([], extra: ["--log-file", log])
        origin.clearAccessLog()
        let result = try driver.run(["verify", "kept.bin", "--mount", mountpoint])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("kept.bin: 17 blocks checked against the CRC32C taken when they arrived, all good"),
                      result.stdout)
        XCTAssertEqual(origin.accessLog().filter { $0.path == "/listed/kept.bin" }.count, 0,
                       "verify sent no request for the file")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertFalse(text.contains("dropping its cached data"), text)

        // The file still reads right, from the cache: its data is not fetched again.
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/kept.bin"), expected)
        XCTAssertEqual(bytesFetched("/listed/kept.bin"), 0, "read from the cache, not the server")
        XCTAssertEqual(try statusJSONState("kept.bin"), "complete")
        try driver.unmount(mountpoint, cache: cache)
    }

    /// The `state` that `status --json` gives the file `name`.
    func statusJSONState(_ name: String) throws -> String? {
        let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
        return files.first { $0["name"] as? String == name }?["state"] as? String
    }
}
