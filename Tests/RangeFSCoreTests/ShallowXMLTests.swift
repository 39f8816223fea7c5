@testable import RangeFSCatalog
import XCTest
@testable import RangeFSObjectStore

/// Issue 38: the XML reader under ObjectListingXML (`ShallowXML`): what XML it reads the way any XML parser would,
/// and what it refuses (anything not well formed, a DOCTYPE, other encodings), always in one pass without
/// recursion, so that hostile answers cost a refusal.
final class ShallowXMLTests: XCTestCase {
    /// The key of the one object of a page whose Key element is written `key`.
    func key(_ key: String, declaration: String = "") -> String? {
        let answer = "\(declaration)<ListBucketResult><Contents><Key>\(key)</Key></Contents></ListBucketResult>"
        return ObjectListingXML.page(Array(answer.utf8))?.objects.first?.key
    }

    func testReferencesCDATACommentsAndLineEnds() {
        XCTAssertEqual(key("&amp;&lt;&gt;&quot;&apos;"), "&<>\"'")
        XCTAssertEqual(key("&#34;&#x22;&#0000065;&#x1F600;"), "\"\"A😀")
        XCTAssertEqual(key("<![CDATA[a<b>&amp;]]>c"), "a<b>&amp;c")
        XCTAssertEqual(key("a<!-- <Key>x</Key> -->b<?pi x?>c"), "abc")
        // XML reads CR LF and a lone CR as LF; a CR written as a reference stays.
        XCTAssertEqual(key("a\r\nb\rc&#13;\n"), "a\nb\nc\r\n")
        XCTAssertEqual(key(" spaced key "), " spaced key ")
        XCTAssertEqual(key("ünï cödé 日本語 \u{1F600} e\u{301}"), "ünï cödé 日本語 \u{1F600} e\u{301}")
        // `>` needs no escape in text.
        XCTAssertEqual(key("a>b"), "a>b")
    }

    func testBadReferencesRefuseTheDocument() {
        for written in ["a & b", "&amp", "&nbsp;", "&#;", "&#x;", "&#0;", "&#xD800;", "&#x110000;", "&#12a;", "&#X22;",
                        "&#99999999999;", "&;"] {
            XCTAssertNil(key(written), written)
        }
    }

    func testDeclarationsNamespacesAndAttributes() {
        XCTAssertEqual(key("k", declaration: "\u{FEFF}<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"), "k")
        XCTAssertEqual(key("k", declaration: "<?xml version='1.0' encoding='utf-8' standalone='yes'?>"), "k")
        XCTAssertEqual(key("k", declaration: "<?xml version=\"1.0\"?><!-- made by hand -->\n"), "k")
        XCTAssertNil(key("k", declaration: "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>"))
        XCTAssertNil(key("k", declaration: " <?xml version=\"1.0\"?>"), "a declaration after the start")
        let doctype = """
        <!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
        <ListBucketResult><Contents><Key>&lol2;</Key></Contents></ListBucketResult>
        """
        XCTAssertNil(ObjectListingXML.page(Array(doctype.utf8)))
        // Elements are known by their local name; attributes, even holding `>` or `/>`, are skipped.
        let prefixed = """
        <s3:ListBucketResult xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/" note='a > b' other="/>">\
        <s3:Contents ><s3:Key>k</s3:Key ><s3:Size>3</s3:Size></s3:Contents></s3:ListBucketResult >
        """
        XCTAssertEqual(ObjectListingXML.page(Array(prefixed.utf8))?.objects,
                       [ObjectListingPage.Object(key: "k", size: 3)])
    }

    func testDocumentsThatAreNotWellFormedAreRefused() {
        let refused = [
            "", "   ", "not xml at all", "{\"Contents\": []}", "<ListBucketResult>",
            "<ListBucketResult></ListBucketresult>", "<ListBucketResult><Contents></ListBucketResult></Contents>",
            "<ListBucketResult/><ListBucketResult/>", "text<ListBucketResult/>", "<ListBucketResult/>text",
            "</ListBucketResult>", "<ListBucketResult", "<ListBucketResult a>", "<ListBucketResult a=b>",
            "<ListBucketResult a=\"b>", "<ListBucketResult a=\"1\"b=\"2\"/>", "< ListBucketResult/>",
            "<ListBucketResult><!-- </ListBucketResult>", "<ListBucketResult><![CDATA[ </ListBucketResult>",
            "<ListBucketResult><? </ListBucketResult>", "<ListBucketResult></ ListBucketResult>",
            "<![CDATA[x]]><ListBucketResult/>",
        ]
        for text in refused {
            XCTAssertNil(ObjectListingXML.page(Array(text.utf8)), text)
            XCTAssertNil(ObjectListingXML.error(Array(text.utf8)), text)
        }
        // The smallest page there is, for contrast, with trailing white space and a comment after the root.
        XCTAssertEqual(ObjectListingXML.page(Array("<ListBucketResult/> <!-- end -->\n".utf8)), ObjectListingPage())
    }

    func testEveryCutOfAPageIsRefused() {
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true</IsTruncated>\
        <Contents><Key>a &amp; b</Key><ETag>&quot;e&quot;</ETag><Size>1</Size></Contents>\
        <CommonPrefixes><Prefix><![CDATA[p/]]></Prefix></CommonPrefixes>\
        <NextContinuationToken>t</NextContinuationToken></ListBucketResult>
        """
        let bytes = Array(answer.utf8)
        XCTAssertNotNil(ObjectListingXML.page(bytes))
        // An answer cut anywhere (a connection that dropped) is no page: a listing is never built from part of one.
        for length in 0..<bytes.count {
            XCTAssertNil(ObjectListingXML.page(Array(bytes[..<length])), "cut at \(length)")
        }
    }

    func testHostileNestingIsRefusedWithoutRecursion() {
        // A million open elements: refused at the depth limit, in one pass (no stack to overflow).
        let deep = Array(String(repeating: "<a>", count: 1_000_000).utf8)
        guard case .failure(let problem) = ShallowXML.parse(deep, keepingDepth: 3) else {
            return XCTFail("a million open elements read as a document")
        }
        XCTAssertTrue(problem.description.hasSuffix("elements nested deeper than 256"), problem.description)
        // Nesting within the limit but below the kept depth is read, and dropped.
        let nested = "<ListBucketResult><Contents><Key>k</Key><Owner>" + String(repeating: "<x>", count: 200)
            + String(repeating: "</x>", count: 200) + "</Owner></Contents></ListBucketResult>"
        XCTAssertEqual(ObjectListingXML.page(Array(nested.utf8))?.objects.map(\.key), ["k"])
    }

    func testProblemsSayWhereAndWhat() {
        guard case .failure(let cut) = ObjectListingXML.read(Array("<ListBucketResult><Contents>".utf8)),
              case .failure(let mismatch) = ObjectListingXML.read(Array("<ListBucketResult></Contents>".utf8)),
              case .failure(let ampersand) = ObjectListingXML.read(Array("<ListBucketResult>a & b".utf8))
        else { return XCTFail("a broken document was read") }
        XCTAssertEqual(cut.description, "at byte 28: the document ends inside <Contents>")
        XCTAssertEqual(mismatch.description, "at byte 29: </Contents> closes <ListBucketResult>")
        XCTAssertEqual(ampersand.description, "at byte 20: a bare & or an unknown reference (S3 writes &amp;)")
    }
}
