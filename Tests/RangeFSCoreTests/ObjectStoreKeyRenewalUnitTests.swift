import Foundation
@testable import RangeFSFetch
import RangeFSTestSupport
import XCTest
@testable import RangeFSObjectStore

/// A key read from a profile is read again when the profile's files change (AWSProfile.swift, Credentials.swift);
/// a key from the environment never is. An expired session key is a failure worth another attempt.
final class ObjectStoreKeyRenewalUnitTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "profile")
    }

    private func write(_ text: String, to name: String) throws {
        try text.write(toFile: directory.path + "/" + name, atomically: true, encoding: .utf8)
    }

    private func profile(_ id: String, _ token: String) -> String {
        "[work]\naws_access_key_id = \(id)\naws_secret_access_key = secret-of-\(id)\naws_session_token = \(token)\n"
    }

    /// The signing key id and session token of the next request to `url`.
    private func sent(_ table: CredentialTable, _ url: String) -> (id: String?, token: String?) {
        let headers = table.wire(for: url, range: 0..<10, validator: nil).headers
        let token = headers.first { $0.hasPrefix("x-amz-security-token: ") }.map { String($0.dropFirst(22)) }
        let authorization = headers.first { $0.hasPrefix("Authorization: ") } ?? ""
        let id = authorization.firstRange(of: "Credential=").map {
            String(authorization[$0.upperBound...].prefix { $0 != "/" })
        }
        return (id, token)
    }

    func testAProfilesKeyIsReadAgainWhenItsFileChangesAndAnEnvironmentKeyIsKept() throws {
        try write(profile("FIRST", "token-1"), to: "credentials")
        let source = ObjectStoreKeySource(profile: "work", credentialsFile: directory.path + "/credentials",
                                          configFile: directory.path + "/config")
        XCTAssertEqual(source.key?.accessKeyID, "FIRST")
        let table = CredentialTable()
        table.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil,
                             key: ("FIRST", "secret-of-FIRST", "token-1"), keySource: source, anonymous: false)
        let url = table.adopt("s3://bkt/f.bin").url
        XCTAssertEqual(sent(table, url).id, "FIRST")
        XCTAssertEqual(sent(table, url).token, "token-1")

        try write(profile("SECOND", "token-2"), to: "credentials")
        XCTAssertEqual(sent(table, url).id, "SECOND", "signed with the key the profile holds now")
        XCTAssertEqual(sent(table, url).token, "token-2")
        let kept = try XCTUnwrap(table.snapshot.values.first?.objectStore?.key)
        XCTAssertEqual(kept.accessKeyID, "SECOND", "the mount keeps the new key (for its next start)")
        XCTAssertEqual(kept.source, source)

        // A source adopted later (`rangefs add`) takes the profile's key, not the expired one of the mount's start.
        let added = table.adopt("s3://bkt/added.bin", replacing: true).url
        XCTAssertEqual(sent(table, added).id, "SECOND")
        XCTAssertEqual(sent(table, url).id, "SECOND")
        XCTAssertEqual(table.snapshot.values.first?.objectStore?.key?.accessKeyID, "SECOND")

        // A profile emptied (half written, or logged out) leaves the key at hand in use.
        try write("", to: "credentials")
        XCTAssertEqual(sent(table, url).id, "SECOND")

        // The same files, but a key from the environment: the profile is never read.
        try write(profile("THIRD", "token-3"), to: "credentials")
        let fromEnvironment = CredentialTable()
        fromEnvironment.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil,
                                       key: ("ENV", "env-secret", "env-token"), anonymous: false)
        let other = fromEnvironment.adopt("s3://bkt/f.bin").url
        try write(profile("FOURTH", "token-4"), to: "credentials")
        XCTAssertEqual(sent(fromEnvironment, other).id, "ENV")
        XCTAssertEqual(sent(fromEnvironment, other).token, "env-token")
    }

    /// The key's id and source are kept in the mount's credentials file, never its secret or token (issue 45), and
    /// a file an older rangefs wrote with them still reads, without them; no description of a key shows either.
    func testTheSourceIsKeptWithTheKeyAndNoDescriptionShowsTheSecret() throws {
        var key = ObjectStoreKey(accessKeyID: "ID", secretAccessKey: "the-secret", sessionToken: "the-token")
        key.source = ObjectStoreKeySource(profile: "p", credentialsFile: "/c", configFile: "/f")
        let encoded = try JSONEncoder().encode(key)
        let text = String(decoding: encoded, as: UTF8.self)
        XCTAssertFalse(text.contains("the-secret") || text.contains("the-token"), text)
        let decoded = try JSONDecoder().decode(ObjectStoreKey.self, from: encoded)
        XCTAssertEqual(decoded.accessKeyID, "ID")
        XCTAssertEqual(decoded.source, key.source)
        XCTAssertTrue(decoded.isMissing)
        let old = Data(#"{"accessKeyID":"ID","secretAccessKey":"s","sessionToken":"t"}"#.utf8)
        let oldKey = try JSONDecoder().decode(ObjectStoreKey.self, from: old)
        XCTAssertNil(oldKey.source)
        XCTAssertTrue(oldKey.isMissing)
        XCTAssertNil(oldKey.sessionToken)
        for text in ["\(key)", String(reflecting: key), { var out = ""; dump(key, to: &out); return out }()] {
            XCTAssertFalse(text.contains("the-secret") || text.contains("the-token"), text)
        }
    }

    /// Issue 45: keys read back from credentials.json have no secret. A profile's is read again from the profile;
    /// one from the environment takes the key this mount was given, or is reported missing and signs nothing.
    func testKeptKeysAreTakenAgainFromTheirProfileOrTheEnvironmentOrReportedMissing() throws {
        try write(profile("PROFILED", "token-p"), to: "credentials")
        let source = ObjectStoreKeySource(profile: "work", credentialsFile: directory.path + "/credentials",
                                          configFile: directory.path + "/config")
        func kept(given: (id: String, secret: String, token: String?)?) throws
            -> (CredentialTable, [(origin: String, key: String)], String, String) {
            let first = CredentialTable()
            first.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil,
                                 key: ("ENV", "env-secret", "env-token"), anonymous: false)
            let fromEnvironment = first.adopt("s3://bkt/f.bin").url
            first.setObjectStore(endpoint: "http://127.0.0.1:9001", region: nil, pathStyle: nil,
                                 key: ("PROFILED", "secret-of-PROFILED", "token-p"), keySource: source, anonymous: false)
            let fromProfile = first.adopt("s3://bkt/g.bin").url
            let saved = try JSONDecoder().decode([String: OriginCredentials].self,
                                                 from: try JSONEncoder().encode(first.snapshot))
            let table = CredentialTable(saved)
            let missing = table.takeKeptKeys(given: given, givenSource: nil)
            return (table, missing, fromEnvironment, fromProfile)
        }
        let (table, missing, fromEnvironment, fromProfile) = try kept(given: ("NEW", "new-secret", nil))
        XCTAssertEqual(missing.map(\.origin), [])
        XCTAssertEqual(sent(table, fromEnvironment).id, "NEW", "the environment's key of this mount")
        XCTAssertEqual(sent(table, fromProfile).id, "PROFILED", "the profile, read again")
        XCTAssertEqual(sent(table, fromProfile).token, "token-p")

        let (bare, lost, url, _) = try kept(given: nil)
        XCTAssertEqual(lost.map(\.origin), ["http://127.0.0.1:9000"])
        XCTAssertTrue(lost.first?.key.contains("ENV") == true, "\(lost)")
        XCTAssertNil(sent(bare, url).id, "a missing key signs nothing")
    }

    func testAnExpiredSessionKeyIsTriedAgainAndAWrongKeyIsNot() {
        XCTAssertTrue(FetchError.objectStore(status: 400, code: "ExpiredToken", bucket: "b").isTransient)
        XCTAssertTrue(FetchError.objectStore(status: 403, code: "TokenRefreshRequired", bucket: "b").isTransient)
        XCTAssertFalse(FetchError.objectStore(status: 403, code: "SignatureDoesNotMatch", bucket: "b").isTransient)
        // A 429 or 408 stays worth another attempt when its body is an XML error with a code not listed.
        XCTAssertTrue(FetchError.objectStore(status: 429, code: "TooManyRequests", bucket: "b").isTransient)
        XCTAssertTrue(FetchError.objectStore(status: 408, code: "RequestTimeTooLong", bucket: "b").isTransient)
        XCTAssertFalse(FetchError.objectStore(status: 403, code: "InvalidAccessKeyId", bucket: "b").isTransient)
        let line = FetchError.objectStore(status: 400, code: "ExpiredToken", bucket: "").userMessage
        XCTAssertTrue(line.contains("write new credentials into the profile"), line)
        XCTAssertFalse(line.contains("\n"))
    }
}
