import Foundation
import Glibc
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 29's end-to-end digests: real nginx origins and mirrors, real mounts, default options apart from the one
/// under test. A file is verified against the digest the user gave, the one its server announces, or the line for
/// it in a SHA256SUMS beside it; a mirror that serves one changed byte is caught and the file refetched from the
/// others; a file every source gets wrong ends in error, and new opens fail with EIO.
final class EndToEndDigestTests: MountTestCase {
    func digestAttribute(_ path: String) throws -> String {
        try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.digest", path]).stdout
    }

    /// Waits until the file's `user.rangefs.digest` is `wanted` (the check runs in the background once the file is
    /// complete), and returns what it last was.
    @discardableResult
    func waitForDigest(_ path: String, _ wanted: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            last = try digestAttribute(path)
            if last == wanted { return last }
            usleep(50_000)
        }
        return last
    }

    func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    func logText(_ path: String, _ mounted: ProcessResult) -> String {
        mounted.stderr + ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    // 1. Each of the three sources verifies a file: `sha256=HEX` on a list-file line (and `--checksum`), the
    //    server's Repr-Digest (nginx add_header), and a SHA256SUMS beside files of a listed directory, read once.
    func testAGivenDigestAReprDigestAndASumsFileEachVerifyAFile() throws {
        let announced = randomBytes(3 << 20)
        let announcedDigest = Data(SHA256.digest(announced)).base64EncodedString()
        var extras = NginxOrigin.Extras()
        extras.locations = { _, _ in
            "location = /announced.bin { add_header Repr-Digest 'sha-256=:\(announcedDigest):'; }"
        }
        let server = try NginxOrigin(extras)
        defer { server.stop() }
        try server.serve("announced.bin", bytes: announced)
        let given = try server.serveRandomFile("given.bin", size: 5 << 20)
        try FileManager.default.createDirectory(atPath: server.path("listed"), withIntermediateDirectories: true)
        let first = try server.serveRandomFile("listed/first.iso", size: 4 << 20)
        let second = try server.serveRandomFile("listed/second.iso", size: 2 << 20)
        try "\(first)  first.iso\n\(second) *second.iso\n".write(toFile: server.path("listed/SHA256SUMS"),
                                                                 atomically: true, encoding: .utf8)
        let list = scratch.path + "/files.list"
        try """
        given.bin=\(server.url("given.bin")) sha256=\(given)
        announced.bin=\(server.url("announced.bin"))
        listed=\(server.url("listed/"))
        """.write(toFile: list, atomically: true, encoding: .utf8)
        try mount([], extra: ["--list", list])

        for name in ["given.bin", "announced.bin", "listed/first.iso", "listed/second.iso"] {
            XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/" + name], stdoutFile: "/dev/null").status, 0)
            XCTAssertEqual(try waitForDigest(mountpoint + "/" + name, "verified sha256"), "verified sha256", name)
        }
        let digests = Dictionary(uniqueKeysWithValues: (try statusJSON()["files"] as? [[String: Any]] ?? []).map {
            ($0["name"] as? String ?? "", $0["digest"] as? String ?? "")
        })
        XCTAssertEqual(digests["given.bin"], "verified sha256 (--checksum)", "\(digests)")
        XCTAssertEqual(digests["announced.bin"], "verified sha256 (the server's Repr-Digest)", "\(digests)")
        XCTAssertEqual(digests["listed/first.iso"], "verified sha256 (\(server.url("listed/SHA256SUMS")))", "\(digests)")
        // The sums file cost one request for both files it lists.
        XCTAssertEqual(server.accessLog().filter { $0.path == "/listed/SHA256SUMS" }.count, 1)
        // An unchecked file says so.
        XCTAssertEqual(try digestAttribute(mountpoint + "/listed/SHA256SUMS"), "unverified")

        // The same through --checksum, after a remount: the record of the verdict is kept, and the given digest too.
        try driver.unmount(mountpoint, cache: cache)
        try mount([server.url("given.bin")], extra: ["--checksum", "sha256=\(given)"])
        XCTAssertEqual(try digestAttribute(mountpoint + "/given.bin"), "verified sha256")
        let bad = try driver.mount(scratch.path + "/other", urls: [server.url("given.bin")],
                                   cache: scratch.path + "/cache2", extra: ["--checksum", "sha256=12"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("'sha256=12' is not a digest rangefs can check; write sha256= followed by"),
                      bad.stderr)
    }

    // 2. Three mirrors; the first serves the file with one byte changed, at the same length. The copy completes,
    //    the check catches it, the file is fetched again with each part from another mirror than before, and it
    //    ends verified with the right bytes.
    func testAMirrorThatServesOneChangedByteIsCaughtAndTheFileEndsVerified() throws {
        let size = 12 << 20
        let servers = try (0..<3).map { _ in try NginxOrigin() }
        defer { servers.forEach { $0.stop() } }
        var bytes = randomBytes(size)
        let expected = Shell.sha256(of: Data(bytes))
        try servers[1].serve("iso.bin", bytes: bytes)
        try servers[2].serve("iso.bin", bytes: bytes)
        bytes[100] ^= 0x55
        try servers[0].serve("iso.bin", bytes: bytes)
        let log = scratch.path + "/rangefs.log"
        let mounted = try mount(["iso.bin=" + servers.map { $0.url("iso.bin") }.joined(separator: " ")],
                                extra: ["--checksum", "sha256=\(expected)", "--log-file", log])
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/iso.bin"], stdoutFile: "/dev/null").status, 0)
        XCTAssertEqual(try waitForDigest(mountpoint + "/iso.bin", "verified sha256"), "verified sha256")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/iso.bin"), expected)
        let text = logText(log, mounted)
        XCTAssertTrue(text.contains("fails its digest check: its sha256 is "), "the mismatch was never caught: \(text)")
        XCTAssertTrue(text.contains("each part from another mirror than before"), text)
        XCTAssertTrue(text.contains("is verified: its sha256 matches --checksum"), text)
        // The changed mirror served byte 100 once, in the first pass; the refetch took it from another.
        let firstBlock = servers[0].accessLog().filter { $0.path == "/iso.bin" && $0.range.hasPrefix("bytes=0-")
            && $0.range != "bytes=0-0" }
        XCTAssertEqual(firstBlock.count, 1, "\(servers[0].accessLog())")
    }

    // 3. Every source wrong (here: the digest given is not the file's): after one refetch the file ends in error,
    //    new opens fail with EIO, status and the log name the URL and both digests, and a remount keeps the verdict.
    func testWithEverySourceBadTheFileEndsInErrorAndNewOpensFail() throws {
        let size = 6 << 20
        try origin.serveRandomFile("wrong.bin", size: size)
        let claimed = String(repeating: "ab", count: 32)
        origin.clearAccessLog()
        let log = scratch.path + "/rangefs.log"
        let mounted = try mount([origin.url("wrong.bin")], extra: ["--checksum", "sha256=\(claimed)", "--log-file", log])
        let path = mountpoint + "/wrong.bin"
        XCTAssertEqual(try Shell.run("/bin/cat", [path], stdoutFile: "/dev/null").status, 0)
        XCTAssertEqual(try waitForDigest(path, "MISMATCH"), "MISMATCH")
        let opened = try Shell.run("/bin/cat", [path], stdoutFile: "/dev/null")
        XCTAssertNotEqual(opened.status, 0)
        XCTAssertTrue(opened.stderr.contains("Input/output error"), opened.stderr)
        XCTAssertEqual(try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.state", path]).stdout,
                       "error: digest mismatch")
        let actual = try Shell.sha256(of: origin.path("wrong.bin"))
        let file = try XCTUnwrap((try statusJSON()["files"] as? [[String: Any]])?.first { $0["name"] as? String == "wrong.bin" })
        XCTAssertEqual(file["state"] as? String, "error", "\(file)")
        let lastError = file["last_error"] as? String ?? ""
        XCTAssertTrue(lastError.contains("digest mismatch") && lastError.contains(actual) && lastError.contains(claimed),
                      lastError)
        let text = logText(log, mounted)
        XCTAssertTrue(text.contains("\(origin.url("wrong.bin")) fails its digest check again after a refetch: its sha256 is \(actual), but --checksum says \(claimed)"), text)
        // Fetched twice: the first pass and the one refetch, no more.
        XCTAssertEqual(dataBytes(origin, "/wrong.bin"), UInt64(2 * size))

        try driver.unmount(mountpoint, cache: cache)
        try mount([origin.url("wrong.bin")], extra: ["--checksum", "sha256=\(claimed)"])
        XCTAssertNotEqual(try Shell.run("/bin/cat", [path], stdoutFile: "/dev/null").status, 0)
        XCTAssertEqual(try digestAttribute(path), "MISMATCH")
    }
}
