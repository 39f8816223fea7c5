import Foundation
@testable import RangeFSFetch
@testable import RangeFSSystem
import XCTest

/// A URL's query leaves it like its `user:password@` (issue 35): the mount knows the URL by its identity, and the
/// real query is kept with the credentials and put back only on the wire.
final class URLQueryTests: XCTestCase {
    func testSigningValuesLeaveTheIdentityAndOtherValuesLeaveOnlyAHash() {
        XCTAssertEqual(URLQuery.split("http://h/f.bin?token=SECRET").identity, "http://h/f.bin?token=***")
        XCTAssertEqual(URLQuery.split("http://h/f.bin?token=SECRET").query, "token=SECRET")
        // A presigned URL issued again (new date, signature) is the same object: the same identity.
        let first = URLQuery.split("https://b/k?X-Amz-Date=20261125T010000Z&X-Amz-Signature=aaaa&Signature=x")
        let again = URLQuery.split("https://b/k?X-Amz-Date=20261126T090000Z&X-Amz-Signature=bbbb&Signature=y")
        XCTAssertEqual(first.identity, "https://b/k?X-Amz-Date=***&X-Amz-Signature=***&Signature=***")
        XCTAssertEqual(first.identity, again.identity)
        // Values that may name the object keep two URLs apart, and appear only as a hash.
        let one = URLQuery.split("http://h/get?id=1&token=t1").identity
        let two = URLQuery.split("http://h/get?id=2&token=t1").identity
        XCTAssertNotEqual(one, two)
        XCTAssertEqual(one, URLQuery.split("http://h/get?id=1&token=t2").identity, "only the token changed")
        XCTAssertTrue(one.hasPrefix("http://h/get?id=***") && one.hasSuffix("&token=***"), one)
        XCTAssertFalse(one.contains("t1"))
        XCTAssertEqual(Redaction.redact(one), "http://h/get?id=***&token=***")
        // Azure's short SAS names count only beside their signature.
        XCTAssertEqual(URLQuery.split("https://a/c/b?sv=2024&sp=r&se=2026&sig=abc").identity,
                       "https://a/c/b?sv=***&sp=***&se=***&sig=***")
        XCTAssertNotEqual(URLQuery.split("http://h/x?sp=1").identity, "http://h/x?sp=***")
        // An identity is its own identity, with nothing to keep; the fragment is never part of it.
        XCTAssertNil(URLQuery.split(one).query)
        XCTAssertEqual(URLQuery.split(one).identity, one)
        let bare = URLQuery.split("http://h/f?a=&b")
        let stem = "http://h/f?a=&***"
        XCTAssertTrue(bare.identity.hasPrefix(stem) && bare.identity.count == stem.count + 16,
                      "an item without = may be a token: hidden, kept apart by its hash: \(bare.identity)")
        XCTAssertEqual(bare.query, "a=&b")
        XCTAssertNil(URLQuery.split("http://h/f?a=").query, "an empty value hides nothing")
        XCTAssertEqual(URLQuery.split("http://h/f#part").identity, "http://h/f")
        XCTAssertEqual(URLQuery.split("http://h/f?token=s#part").identity, "http://h/f?token=***")
        XCTAssertEqual(URLQuery.restoring("token=s&x=1", into: "http://h/f?token=***&x=***0123456789abcdef"),
                       "http://h/f?token=s&x=1")
    }

    func testTheCredentialTableKeepsTheQueryAndPutsItBackOnTheWireOnly() throws {
        let table = CredentialTable()
        let adopted = table.adopt("http://bob:pw@h:81/f.bin?token=SECRET&n=1")
        let identity = adopted.url
        XCTAssertTrue(adopted.changed)
        XCTAssertFalse(identity.contains("SECRET") || identity.contains("pw"), identity)
        XCTAssertEqual(table.wireURL(for: identity), "http://h:81/f.bin?token=SECRET&n=1")
        XCTAssertEqual(table.credentials(for: identity)?.user, "bob")
        XCTAssertEqual(table.wireURL(for: "http://h:81/other"), "http://h:81/other", "nothing kept: as it is")
        XCTAssertFalse(table.adopt("http://h:81/f.bin?token=SECRET&n=1").changed, "the same query again")
        XCTAssertEqual(table.adopt(identity).url, identity, "an identity stays")
        XCTAssertFalse(table.adopt(identity).changed, "and never replaces the kept query")
        // A new token for the same file replaces the old one.
        XCTAssertEqual(table.adopt("http://h:81/f.bin?token=NEW&n=1").url, identity)
        XCTAssertEqual(table.wireURL(for: identity), "http://h:81/f.bin?token=NEW&n=1")

        // A whole URL from an older catalog does not undo the newer token (nor the login).
        XCTAssertEqual(table.adopt("http://eve:old@h:81/f.bin?token=OLD&n=1", replacing: false).url, identity)
        XCTAssertEqual(table.wireURL(for: identity), "http://h:81/f.bin?token=NEW&n=1")
        XCTAssertEqual(table.credentials(for: identity)?.user, "bob")

        // Saved and read back the way credentials.json is; a file an older rangefs saved (no queries) still reads.
        let saved = try JSONEncoder().encode(table.snapshot)
        let restored = CredentialTable(try JSONDecoder().decode([String: OriginCredentials].self, from: saved))
        XCTAssertEqual(restored.wireURL(for: identity), "http://h:81/f.bin?token=NEW&n=1")
        let older = #"{"http://h:81":{"user":"bob","password":"pw","headers":[]}}"#
        let old = try JSONDecoder().decode([String: OriginCredentials].self, from: Data(older.utf8))
        XCTAssertEqual(old["http://h:81"]?.user, "bob")
        XCTAssertNil(old["http://h:81"]?.queries)

        XCTAssertTrue(restored.forgetQuery(of: identity))
        XCTAssertEqual(restored.wireURL(for: identity), identity)
        XCTAssertFalse(restored.forgetQuery(of: identity))
    }

    /// An origin is what credentials hang on: read from the bytes where the host is ASCII, by characters
    /// elsewhere, both giving scheme and host lowercased and the port always written.
    func testAnOriginIsTheSchemeHostAndPortOfEveryURLShape() {
        let origins: [(String, String?)] = [
            ("http://example.org/a/b", "http://example.org:80"),
            ("HTTPS://Example.ORG/x?y=1", "https://example.org:443"),
            ("https://user:p%40ss@Host:8443/f", "https://host:8443"),
            ("http://a@b@host/f", "http://host:80"),
            ("http://host:/f", "http://host:80"),
            ("http://[::1]:8080/f", "http://[::1]:8080"),
            ("http://[::1]/f", "http://[::1]:80"),
            ("http://host?q=a:b", "http://host:80"),
            ("http://host#frag:1", "http://host:80"),
            ("http://Bücher.example/f", "http://bücher.example:80"),
            ("http://ÜSER@host/f", "http://host:80"),
            ("ftp://host/f", nil),
            ("http:///f", nil),
            ("http://user@/f", nil),
            ("no scheme", nil),
            ("http:/", nil),
            ("", nil),
        ]
        for (url, expected) in origins { XCTAssertEqual(URLOrigin.of(url), expected, url) }
    }
}
