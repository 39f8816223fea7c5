import RangeFSCore
import XCTest

final class NamingTests: XCTestCase {
    func metadata(_ url: String, suggested: String? = nil) -> RemoteMetadata {
        RemoteMetadata(url: url, size: 1, etag: "", lastModified: "", suggestedName: suggested)
    }

    func testNameComesFromExplicitThenDispositionThenPath() {
        XCTAssertEqual(EntryNaming.preferredName(explicit: "mine.iso", metadata: metadata("http://h/a/b.iso", suggested: "s.iso")), "mine.iso")
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://h/a/b.iso", suggested: "../../etc/s.iso")), "s.iso")
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://h/a/my%20file.iso?x=1#f")), "my file.iso")
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://host:8080/")), "host_8080")
    }

    func testUnsafeNamesAreMadeSafe() {
        XCTAssertEqual(EntryNaming.sanitize("a/b"), "a_b")
        XCTAssertEqual(EntryNaming.sanitize(".."), "__")
        XCTAssertEqual(EntryNaming.sanitize("."), "_")
        XCTAssertEqual(EntryNaming.sanitize(""), "download")
        XCTAssertEqual(EntryNaming.sanitize("x\0y"), "x_y")
        XCTAssertEqual(EntryNaming.sanitize(String(repeating: "é", count: 200)).utf8.count, 254)
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://h/%2F..%2F")), "_.._")
    }

    func testDuplicatesGetNumberedSuffixes() {
        let catalog = Catalog()
        XCTAssertEqual(catalog.add(metadata("http://a/x.iso")).name, "x.iso")
        XCTAssertEqual(catalog.add(metadata("http://b/x.iso")).name, "x (2).iso")
        XCTAssertEqual(catalog.add(metadata("http://c/x.iso")).name, "x (3).iso")
        XCTAssertEqual(catalog.items.map(\.inode).sorted(), [2, 3, 4])
    }

    func testCredentialsAreRedacted() {
        XCTAssertEqual(Redaction.redact("https://user:pw@host/p@x"), "https://***@host/p@x")
        XCTAssertEqual(Redaction.redact("http://host/path"), "http://host/path")
    }
}
