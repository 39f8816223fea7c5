import Foundation
@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// What a URL shows (issue 35): its `user:password@` replaced, its query's names kept and values hidden, the text
/// of its fragment hidden.
final class RedactionTests: XCTestCase {
    func testQueryValuesAreHiddenNamesKeptAndUserinfoStillHidden() {
        XCTAssertEqual(Redaction.redact("http://h/f.bin?token=abc&x=1"), "http://h/f.bin?token=***&x=***")
        XCTAssertEqual(Redaction.redact("https://b.s3.amazonaws.com/k.iso?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                                        + "&X-Amz-Credential=AKIA%2F20261125%2Fus-east-1%2Fs3%2Faws4_request"
                                        + "&X-Amz-Signature=0123abcd"),
                       "https://b.s3.amazonaws.com/k.iso?X-Amz-Algorithm=***&X-Amz-Credential=***&X-Amz-Signature=***")
        XCTAssertEqual(Redaction.redact("https://user:pw@host/p?sig=s#key=k"), "https://***@host/p?sig=***#***")
        XCTAssertEqual(Redaction.redact("http://h/f#frag"), "http://h/f#***", "a fragment can hold a share key")
        XCTAssertEqual(Redaction.redact("http://h/f?SECRET"), "http://h/f?***", "an item without = may be a token")
        XCTAssertEqual(Redaction.redact("http://h/f?a=&&b=1=2"), "http://h/f?a=&&b=***", "empty values stay empty")
        XCTAssertEqual(Redaction.redact("http://h/f?"), "http://h/f?")
        XCTAssertEqual(Redaction.redact("http://h/a@b?c=d"), "http://h/a@b?c=***", "an @ in the path is no userinfo")
        XCTAssertEqual(Redaction.redact("http://h:8080/path"), "http://h:8080/path")
        XCTAssertEqual(Redaction.redact("http://u:p@h?t=1"), "http://***@h?t=***", "a query right after the host")
        XCTAssertEqual(Redaction.redact("name.iso=http://h/f?t=1"), "name.iso=http://h/f?t=***", "a NAME=URL argument")
        XCTAssertEqual(Redaction.redact("not a url?t=1"), "not a url?t=1")
        let once = Redaction.redact("https://u:p@h/f?token=abc&id=2#x")
        XCTAssertEqual(Redaction.redact(once), once, "redacting twice changes nothing more")
    }

    /// Issue 45: every proxy of a `--proxy` chain loses its login, the second of a group too (one URL's authority
    /// ran into the next, `u:p@p1|http:`), and a proxy written without a scheme as well.
    func testEveryURLOfAChainIsRedacted() {
        XCTAssertEqual(Redaction.redactingEach("http://u:a@p1:3128|http://u2:b@p2:3128;https://u3:c@p3"),
                       "http://***@p1:3128|http://***@p2:3128;https://***@p3")
        XCTAssertEqual(Redaction.redactingEach("https://h/a;jsessionid=x?t=1"), "https://h/a;jsessionid=x?t=***",
                       "a ; in a path not followed by a scheme is the same URL")
        XCTAssertEqual(Redaction.redactingProxies("http://u:a@p1:3128|u2:b@p2:3128;DIRECT"),
                       "http://***@p1:3128|***@p2:3128;DIRECT")
        XCTAssertEqual(Redaction.redactingProxies("p1:3128|p2:3128"), "p1:3128|p2:3128")
    }

    /// Issue 45: a kept HTML listing keeps its links' query names, not their values; what it lists is unchanged.
    func testAKeptHTMLListingLosesItsQueryValuesAndListsTheSame() {
        let page = """
        <a href="a.bin">a.bin</a> <a href="a.bin?X-Amz-Credential=CRED&amp;X-Amz-Signature=SIG">signed</a>
        <a href=b.bin?sig=SIG2>b</a> <a href="c%3Fd.bin">c?d.bin</a> <a href="?C=N;O=D">sort</a>
        <a href="e.bin">e.bin?token=SIG3</a>   23-Nov-2026 10:00    1048576

        """
        let kept = ListingRedaction.kept(Array(page.utf8))
        let text = String(decoding: kept, as: UTF8.self)
        for secret in ["CRED", "SIG"] { XCTAssertFalse(text.contains(secret), text) }
        XCTAssertTrue(text.contains("a.bin?X-Amz-Credential=***&amp;X-Amz-Signature=***"), text)
        let base = "http://h/d/"
        XCTAssertEqual(DirectoryListing.parse(kept, base: base), DirectoryListing.parse(Array(page.utf8), base: base))
        XCTAssertEqual(DirectoryListing.parse(kept, base: base).entries.map(\.name), ["a.bin", "c?d.bin", "e.bin"])
        let json = Array(#"[{"name":"x?token=1","type":"file","size":3}]"#.utf8)
        XCTAssertEqual(ListingRedaction.kept(json), json, "a JSON listing's names are kept as they are")
    }

    /// Found by the Redaction fuzzer: a combining mark right after `?` or `/` made one Character of both, and a
    /// scan by Characters missed the delimiter: the query's values showed, or the host was taken from the path.
    func testACombiningMarkAfterADelimiterHidesNothingLess() {
        XCTAssertEqual(Redaction.redact("https://h/f?\u{301}token=SECRET"), "https://h/f?\u{301}token=***")
        XCTAssertEqual(Redaction.redact("https://u:pw@h/\u{64D}x@y/z?a=1"), "https://***@h/\u{64D}x@y/z?a=***")
        XCTAssertEqual(Redaction.redact("https://h/f?a=1&\u{301}b=2#\u{301}k"), "https://h/f?a=***&\u{301}b=***#***")
    }
}
