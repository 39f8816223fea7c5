// Issue 38: a session key that expires while a mount runs is read again from its profile. nginx plays the one part
// of a store that matters here: it serves the object path-style, answers a request whose x-amz-security-token is
// marked expired (a file of that name in its `expired/` folder) with S3's `400 ExpiredToken` document, and logs
// each request's token and status. (Neither S3 server of the other tests expires session keys.)

import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

final class ObjectStoreKeyRenewalTests: MountTestCase {
    private var store: NginxOrigin!
    private var expired: String { store.root + "/../expired" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        var extras = NginxOrigin.Extras()
        extras.http = { _, _ in "log_format tokens '$status|$uri|$http_x_amz_security_token';" }
        extras.locations = { _, prefix in
            """
            location /bucket/ {
                    default_type application/xml;
                    access_log \(prefix)/logs/tokens.log tokens;
                    if (-f \(prefix)/expired/$http_x_amz_security_token) {
                        return 400 '<?xml version="1.0" encoding="UTF-8"?>\\n<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>';
                    }
                }
            """
        }
        store = try NginxOrigin(extras)
        try FileManager.default.createDirectory(atPath: expired, withIntermediateDirectories: true)
    }

    override func tearDown() {
        driver?.unmountAll()
        store?.stop()
        super.tearDown()
    }

    /// (status, token) of each request for the object, in order.
    private func requests() throws -> [(status: Int, token: String)] {
        let text = (try? String(contentsOfFile: store.root + "/../logs/tokens.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false)
            return (Int(fields[0]) ?? 0, fields.count > 2 ? String(fields[2]) : "")
        }
    }

    /// Writes the profile `work` the way the AWS tools do: a new file renamed over the old one.
    private func writeProfile(_ path: String, id: String, secret: String, token: String) throws {
        try "[work]\naws_access_key_id = \(id)\naws_secret_access_key = \(secret)\naws_session_token = \(token)\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
    }

    func testAnExpiredSessionKeyIsReadAgainFromItsProfileWithoutARemount() throws {
        let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        try FileManager.default.createDirectory(atPath: store.path("bucket"), withIntermediateDirectories: true)
        try store.serve("bucket/obj.bin", bytes: bytes)
        let profile = scratch.path + "/aws-credentials"
        try writeProfile(profile, id: "AKIDFIRST", secret: "first-secret", token: "token-first")
        let log = scratch.path + "/rangefs.log"
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(mountpoint)") }
        let variables = ["AWS_CONFIG_FILE=\(scratch.path)/no-config", "AWS_SHARED_CREDENTIALS_FILE=\(profile)"]
        let mounted = try Shell.run("/usr/bin/env", variables + [
            driver.binary, "mount", mountpoint, "s3://bucket/obj.bin", "--cache", cache,
            "--s3-endpoint", "http://127.0.0.1:\(store.port)", "--s3-profile", "work", "--log-file", log,
        ], timeout: 120)
        if driver.isMounted(mountpoint) { driver.record(mountpoint) }
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertEqual(try pread(mountpoint + "/obj.bin", offset: 0, count: 65536), Array(bytes.prefix(65536)))
        XCTAssertEqual(try driver.run(["evict", "obj.bin", "--mount", mountpoint]).status, 0)

        // The store expires the key: every request signed with it is refused, and the read fails with one line
        // in the store's words.
        XCTAssertTrue(FileManager.default.createFile(atPath: expired + "/token-first", contents: nil))
        let before = try requests().count
        XCTAssertEqual(readError(mountpoint + "/obj.bin", offset: 0, count: 65536), EIO)
        let refused = try requests().dropFirst(before)
        XCTAssertFalse(refused.isEmpty)
        XCTAssertTrue(refused.allSatisfy { $0.status == 400 && $0.token == "token-first" }, "\(refused)")
        let logged = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(logged.contains("400 ExpiredToken: the session token has expired"), logged)

        // New credentials land in the profile: the next read is signed with them, and no remount is needed.
        try writeProfile(profile, id: "AKIDSECOND", secret: "second-secret", token: "token-second")
        let renewedAt = try requests().count
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/obj.bin"), Shell.sha256(of: Data(bytes)))
        let renewed = try requests().dropFirst(renewedAt)
        XCTAssertFalse(renewed.isEmpty)
        XCTAssertTrue(renewed.allSatisfy { $0.token == "token-second" && ($0.status == 206 || $0.status == 200) },
                      "\(renewed)")
        XCTAssertFalse(logged.contains("second-secret") || logged.contains("first-secret"), "no secret in the log")
    }
}
