import Foundation
import Glibc
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// credentials.json under `rangefs add` and `rm` (the review of issue 35): concurrent adds keep every token, `rm`
/// of one name keeps the token another name of the same object still sends, and a failed add keeps no token.
final class CredentialKeepingTests: MountTestCase {
    /// A token of its own for file `index`, of a length that differs from file to file (a shorter JSON written
    /// over a longer one once left trailing garbage).
    func token(_ index: Int) -> String {
        "q-\(index)-" + String(UInt64.random(in: 1...UInt64.max), radix: 16) + String(repeating: "x", count: index * 37)
    }

    func testEightConcurrentAddsWithTokensAllSurviveARemountWithNoURLs() throws {
        let origin = try startTokenOrigin(token: token(99))
        defer { _ = origin.server.stop() }
        let seedToken = token(8)
        _ = try serveRandom(origin, "seed.bin", size: 64 << 10)
        try setToken(seedToken, of: "seed.bin", in: origin)
        var expected: [String: String] = [:]
        var urls: [String] = []
        for index in 0..<8 {
            let name = "c\(index).bin"
            expected[name] = try serveRandom(origin, name, size: 256 << 10)
            let secret = token(index)
            try setToken(secret, of: name, in: origin)
            urls.append("http://127.0.0.1:\(origin.port)/\(name)?token=\(secret)")
        }
        let log = scratch.path + "/rangefs.log"
        try mount(["http://127.0.0.1:\(origin.port)/seed.bin?token=\(seedToken)"], extra: ["--log-file", log])

        let results = LockedBox<[Int: ProcessResult]>([:])
        let errors = LockedBox<[String]>([])
        DispatchQueue.concurrentPerform(iterations: urls.count) { index in
            do {
                let result = try driver.run(["add", urls[index], "--mount", mountpoint], timeout: 120)
                results.withLock { $0[index] = result }
            } catch {
                errors.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(errors.withLock { $0 }, [])
        for (index, result) in results.withLock({ $0 }) {
            XCTAssertEqual(result.status, 0, "add of c\(index).bin: \(result.stderr)")
        }
        try driver.unmount(mountpoint, cache: cache)
        let failedSaves = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            .filter { $0.contains("cannot save the credentials") }
        XCTAssertEqual(failedSaves, [], "every save of credentials.json worked")

        // No cached data: every file is fetched again after the remount, with the token credentials.json kept.
        try FileManager.default.removeItem(atPath: cache + "/entries")
        let before = origin.requests.count
        try mount([])
        for (name, sha) in expected {
            XCTAssertEqual(try? Shell.sha256(of: mountpoint + "/" + name), sha, "\(name) after the remount")
        }
        let after = Array(origin.requests.dropFirst(before))
        XCTAssertTrue(after.contains { $0.status == 206 }, "read from the server: \(after)")
        XCTAssertEqual(after.filter { !$0.tokenRight }.count, 0, "every request had its file's token: \(after)")
    }

    func testRmOfOneOfTwoNamesForOneObjectKeepsTheTokenTheOtherSends() throws {
        let old = token(1), new = token(2)
        let origin = try startTokenOrigin(token: new)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "obj.bin", size: 1 << 20)
        // Two presigned URLs of one object: one identity (`obj.bin?token=***`), the token given last is sent.
        let base = "http://127.0.0.1:\(origin.port)/obj.bin?token="
        try mount(["a.bin=" + base + old, "b.bin=" + base + new])
        let removed = try driver.run(["rm", "a.bin", "--mount", mountpoint])
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: mountpoint + "/a.bin"))
        XCTAssertEqual(try? Shell.sha256(of: mountpoint + "/b.bin"), expected, "b.bin still sends its token")
        XCTAssertTrue(try String(contentsOfFile: cache + "/credentials.json", encoding: .utf8).contains(new))
        try driver.unmount(mountpoint, cache: cache)

        try FileManager.default.removeItem(atPath: cache + "/entries")
        let before = origin.requests.count
        try mount([])
        XCTAssertEqual(try? Shell.sha256(of: mountpoint + "/b.bin"), expected, "and after a remount")
        let after = Array(origin.requests.dropFirst(before))
        XCTAssertTrue(after.contains { $0.status == 206 }, "read from the server: \(after)")
        XCTAssertEqual(after.filter { !$0.tokenRight }.count, 0, "every request had the token: \(after)")
    }

    func testAFailedAddKeepsNoToken() throws {
        let kept = token(3), failed = token(4)
        let origin = try startTokenOrigin(token: kept)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "here.bin", size: 64 << 10)
        try mount(["http://127.0.0.1:\(origin.port)/here.bin?token=\(kept)"])
        // A file the server does not have (404 to its own token, 403 to any other).
        try setToken(failed, of: "missing.bin", in: origin)
        let added = try driver.run(["add", "http://127.0.0.1:\(origin.port)/missing.bin?token=\(failed)",
                                    "--mount", mountpoint])
        XCTAssertNotEqual(added.status, 0, added.stdout)
        XCTAssertTrue(origin.requests.contains { $0.status == 404 && $0.tokenRight }, "\(origin.requests)")
        let credentials = try String(contentsOfFile: cache + "/credentials.json", encoding: .utf8)
        XCTAssertFalse(credentials.contains(failed), "the failed add's token is kept: \(credentials)")
        XCTAssertTrue(credentials.contains(kept), credentials)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/here.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertFalse(try String(contentsOfFile: cache + "/credentials.json", encoding: .utf8).contains(failed))
    }
}
