@testable import RangeFSCatalog
import RangeFSTestSupport
import XCTest

/// Issue 35, case 8: an answer to a directory URL that is no listing is said to be none, by its bytes; an empty
/// listing still is one.
final class ListingProblemTests: XCTestCase {
    let base = "http://127.0.0.1:8080/pub/"

    func problem(_ body: [UInt8]) -> String? {
        DirectoryListing.problem(with: body, parsed: DirectoryListing.parse(body, base: base))
    }

    func testBinaryBytesAreNoListingEvenWithALinkInThem() {
        var body = pseudoRandomBytes(count: 2 << 20)
        // What chance puts in 2 MiB of random bytes about half the time, and an href besides.
        let link = Array(#"<a href="x.bin">x.bin</a>"#.utf8)
        body.replaceSubrange(1000..<(1000 + link.count), with: link)
        let why = problem(body)
        XCTAssertNotNil(why)
        XCTAssertTrue(why?.contains("binary data (2097152 bytes)") == true, why ?? "")
        XCTAssertTrue(why?.contains("mount it without the trailing /") == true, why ?? "")
    }

    func testTextWithoutLinksOrThatOnlyStartsLikeJSONIsNoListing() {
        XCTAssertNotNil(problem(Array("[section]\nkey = value\n".utf8)), "an INI file is no JSON array")
        XCTAssertNotNil(problem(Array("<html><body><h1>Welcome</h1></body></html>".utf8)))
        XCTAssertNotNil(problem([]))
    }

    func testEmptyListingsOfEachServerAreListings() {
        let nginxEmpty = """
        <html>\r\n<head><title>Index of /empty/</title></head>\r\n<body>\r\n<h1>Index of /empty/</h1><hr><pre>\
        <a href="../">../</a>\r\n</pre><hr></body>\r\n</html>\r\n
        """
        XCTAssertNil(problem(Array(nginxEmpty.utf8)))
        XCTAssertNil(problem(Array("[\n]\n".utf8)), "nginx's empty JSON listing")
        XCTAssertNil(problem(Array("[]".utf8)), "Caddy's")
        let python = "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Directory listing "
            + "for /e/</title>\n</head>\n<body>\n<h1>Directory listing for /e/</h1>\n<hr>\n<ul>\n</ul>\n<hr>\n</body>\n"
            + "</html>\n"
        XCTAssertNil(problem(Array(python.utf8)), "python's empty page has no link at all, and is a listing")
    }
}
