@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSSystem
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

    /// Issue 35: `FileName` compares, hashes and orders by UTF-8 bytes, where `String` uses canonical equivalence.
    func testFileNamesCompareHashAndSortByTheirBytes() {
        let nfc = FileName("\u{E9}.txt"), nfd = FileName("e\u{301}.txt")
        XCTAssertNotEqual(nfc, nfd)
        XCTAssertEqual(Set([nfc, nfd, FileName("\u{E9}.txt")]).count, 2)
        let table: [FileName: Int] = [nfc: 1, nfd: 2]
        XCTAssertEqual(table[FileName("e\u{301}.txt")], 2)
        XCTAssertEqual(table[FileName("\u{E9}.txt")], 1)
        XCTAssertTrue(nfd < nfc, "65 sorts before C3")
        XCTAssertEqual([FileName("b"), FileName("B"), FileName("a"), nfc].sorted().map(\.string), ["B", "a", "b", "\u{E9}.txt"])
        XCTAssertTrue(FileName.same("x", "x"))
        XCTAssertFalse(FileName.same("\u{E9}", "e\u{301}"))
    }

    /// Issue 35: a name from a URL or Content-Disposition never holds a control character; an explicit one that
    /// does is refused with the reason.
    func testControlCharactersNeverReachAName() {
        XCTAssertEqual(EntryNaming.sanitize("a\nb\tc\u{7F}d\u{1B}.txt"), "a_b_c_d_.txt")
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://h/new%0Aline.bin")), "new_line.bin")
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata("http://h/x", suggested: "r\rn.bin")), "r_n.bin")
        XCTAssertNotNil(EntryNaming.problem(withExplicitName: "tab\there"))
        XCTAssertEqual(EntryNaming.sanitize("\u{E9}t\u{E9}.mp4"), "\u{E9}t\u{E9}.mp4")
        XCTAssertEqual(Array(EntryNaming.sanitize("e\u{301}.txt").utf8), Array("e\u{301}.txt".utf8), "bytes kept as given")
    }

    func testDuplicatesGetNumberedSuffixes() {
        let catalog = Catalog()
        XCTAssertEqual(catalog.add(metadata("http://a/x.iso")).name, "x.iso")
        XCTAssertEqual(catalog.add(metadata("http://b/x.iso")).name, "x (2).iso")
        XCTAssertEqual(catalog.add(metadata("http://c/x.iso")).name, "x (3).iso")
        XCTAssertEqual(catalog.items.map(\.inode).sorted(), [2, 3, 4])
    }

    func testLongNamesAreCutAtACharacterBoundaryAndSaySo() {
        let long = String(repeating: "é", count: 2000) + "x.iso"  // 4,005 bytes of two-byte characters
        let name = EntryNaming.preferredName(explicit: long, metadata: metadata("http://h/a"))
        XCTAssertEqual(name.utf8.count, 254, "127 whole characters; never half of one")
        XCTAssertEqual(name, String(repeating: "é", count: 127))
        XCTAssertEqual(EntryNaming.overlongName(explicit: long, metadata: metadata("http://h/a")), long)
        XCTAssertNil(EntryNaming.overlongName(explicit: "short.iso", metadata: metadata("http://h/a")))
        let fromURL = "http://h/" + String(repeating: "%E2%82%AC", count: 100)  // 100 euro signs: 300 bytes
        XCTAssertEqual(EntryNaming.preferredName(explicit: nil, metadata: metadata(fromURL)).utf8.count, 255)
        XCTAssertNotNil(EntryNaming.overlongName(explicit: nil, metadata: metadata(fromURL)))
    }

    func testNumberedDuplicatesStayWithin255Bytes() {
        let catalog = Catalog()
        let shared = String(repeating: "ü", count: 200)  // both names cut to the same 254 bytes
        let first = catalog.add(metadata("http://a/1"), explicitName: shared + "1.mkv").name
        let second = catalog.add(metadata("http://a/2"), explicitName: shared + "2.mkv").name
        XCTAssertEqual(first, String(repeating: "ü", count: 127))
        XCTAssertLessThanOrEqual(second.utf8.count, 255)
        XCTAssertTrue(second.hasSuffix(" (2)"), second)
        XCTAssertNotNil(String(validating: second.utf8, as: UTF8.self))
        let withExtension = String(repeating: "a", count: 251) + ".mkv"  // exactly 255 bytes
        XCTAssertEqual(catalog.add(metadata("http://a/3"), explicitName: withExtension).name, withExtension)
        let numbered = catalog.add(metadata("http://a/4"), explicitName: withExtension).name
        XCTAssertEqual(numbered.utf8.count, 255)
        XCTAssertTrue(numbered.hasSuffix(" (2).mkv"), numbered)
    }

    func testUnsafeExplicitNamesAreNamedAsTheProblem() {
        XCTAssertNotNil(EntryNaming.problem(withExplicitName: "../../etc/x"))
        XCTAssertNotNil(EntryNaming.problem(withExplicitName: "a/b"))
        XCTAssertNotNil(EntryNaming.problem(withExplicitName: ".."))
        XCTAssertNil(EntryNaming.problem(withExplicitName: "movie: the sequel.mp4"))
    }

    func testCredentialsAreRedacted() {
        XCTAssertEqual(Redaction.redact("https://user:pw@host/p@x"), "https://***@host/p@x")
        XCTAssertEqual(Redaction.redact("http://host/path"), "http://host/path")
    }
}
