import Foundation
@testable import RangeFSCore
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
}
