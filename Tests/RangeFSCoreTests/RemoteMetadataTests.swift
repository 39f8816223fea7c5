@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSSystem
import XCTest

final class RemoteMetadataTests: XCTestCase {
    func testContentRangeForms() {
        XCTAssertEqual(ContentRange(parsing: "bytes 0-0/12345"), ContentRange(range: 0..<1, completeLength: 12345))
        XCTAssertEqual(ContentRange(parsing: "bytes 10-19/*"), ContentRange(range: 10..<20, completeLength: nil))
        XCTAssertEqual(ContentRange(parsing: "bytes */0"), ContentRange(range: nil, completeLength: 0))
        XCTAssertNil(ContentRange(parsing: "bytes 5-4/10"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-10/10"), "last byte past the end")
        XCTAssertNil(ContentRange(parsing: "items 0-1/2"))
        XCTAssertEqual(ContentRange(parsing: "\tBYTES  0-0/7 \r\n"), ContentRange(range: 0..<1, completeLength: 7))
    }

    /// Content-Range is read on its bytes (every response reads it three times); it gives what the reading by
    /// Character it replaced gave, over texts built from the pieces a server or a fuzzer sends: every mix of case,
    /// white space, line ends, `*`, signs, extra separators, non-ASCII white space and combining marks. The one
    /// difference by design: a combining mark on the space after "bytes" (the Character reading dropped it with
    /// the space) leaves a number that is no number, refused.
    func testContentRangeReadOnBytesGivesWhatTheCharacterReadingGave() {
        let prefixes = ["bytes ", "BYTES ", "Bytes\t", "bytes", "\tbytes  ", "bytes \u{301}", "octets ", " bytes "]
        let ranges = ["0-0", "10-19", "*", "5-4", "0-", "-5", "+1-2", "1--2", "1-2-3", "00-01", "1\u{301}-2", "1 -2",
                      "18446744073709551615-18446744073709551615", "+0-+1", "-0", "0-٣", ""]
        let slashes = ["/", "//", "/\u{301}", " / ", ""]
        let totals = ["12345", "*", "20", "2", "+7", "-7", "9223372036854775807", "9223372036854775808", "1\u{A0}",
                      "3\r\n", "4 \t", "-0", "-00", "+", "18446744073709551616", "٣", ""]
        var compared = 0
        for prefix in prefixes {
            for range in ranges {
                for slash in slashes {
                    for total in totals {
                        let text = prefix + range + slash + total
                        let read = ContentRange(parsing: text)
                        if prefix == "bytes \u{301}" {
                            XCTAssertNil(read, text.debugDescription)
                        } else {
                            XCTAssertEqual(read, Self.characterReading(text), text.debugDescription)
                        }
                        compared += 1
                    }
                }
            }
        }
        XCTAssertEqual(compared, prefixes.count * ranges.count * slashes.count * totals.count)
    }

    /// Content-Range as it was read before, by Character: the reference the byte reading is held to.
    private static func characterReading(_ text: String) -> ContentRange? {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.utf8.count >= 6,
              trimmed.utf8.prefix(6).lazy.map({ (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }).elementsEqual("bytes ".utf8)
        else { return nil }
        let spec = trimmed.dropFirst(6).trimmingWhitespace()
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        var completeLength: UInt64?
        if parts[1] != "*" {
            guard let total = UInt64(parts[1]), total <= ContentRange.largestLength else { return nil }
            completeLength = total
        }
        if parts[0] == "*" { return ContentRange(range: nil, completeLength: completeLength) }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = UInt64(bounds[0]), let last = UInt64(bounds[1]), first <= last,
              last < ContentRange.largestLength, completeLength.map({ last < $0 }) ?? true
        else { return nil }
        return ContentRange(range: first..<(last + 1), completeLength: completeLength)
    }

    /// Header values, listing fields and names: leading spaces and tabs go, and trailing ones with line ends
    /// (byte by byte: every response header is trimmed, and the Character-wise version cost a tenth of the
    /// daemon's CPU for small files).
    func testTrimmingWhitespaceTakesSpacesTabsAndLineEnds() {
        XCTAssertEqual("  a b\t\r\n".trimmingWhitespace(), "a b", "a CRLF line end goes too")
        XCTAssertEqual("\t\"e\"".trimmingWhitespace(), "\"e\"")
        XCTAssertEqual("\na".trimmingWhitespace(), "\na", "a leading line end stays")
        XCTAssertEqual(" é\u{301} ".trimmingWhitespace(), "é\u{301}")
        XCTAssertEqual(" \t ".trimmingWhitespace(), "")
        XCTAssertEqual(Substring("x: 12 ").dropFirst(2).trimmingWhitespace(), "12")
    }

    func testProbeOf206UsesTheCompleteLength() throws {
        let head = ResponseHead(status: 206, headers: [
            "content-range": "bytes 0-0/5000", "etag": "\"e1\"", "last-modified": "Sun, 06 Nov 1994 08:49:37 GMT",
            "content-disposition": "attachment; filename=\"report 1.pdf\"",
        ])
        let metadata = try ProbedMetadata.read(url: "http://h/x", probeResponse: head)
        XCTAssertEqual(metadata.size, 5000)
        XCTAssertEqual(metadata.etag, "\"e1\"")
        XCTAssertEqual(metadata.suggestedName, "report 1.pdf")
        XCTAssertEqual(metadata.modificationTime, 784_111_777)
        XCTAssertEqual(metadata.ifRangeValidator, "\"e1\"")
    }

    func testProbeOf200UsesContentLengthAndOthersFail() throws {
        let plain = try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 200, headers: ["content-length": "42"]))
        XCTAssertEqual(plain.size, 42)
        XCTAssertThrowsError(try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 404, headers: [:]))) {
            XCTAssertEqual($0 as? FetchError, .httpStatus(404))
        }
        XCTAssertTrue(plain.sizeKnown)
        let chunked = try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 200, headers: ["etag": "\"c\""]))
        XCTAssertEqual(chunked, .unsized(url: "u", etag: "\"c\"", lastModified: ""), "no length: a stream-only file")
        let unknownTotal = try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 206, headers: ["content-range": "bytes 0-0/*"]))
        XCTAssertFalse(unknownTotal.sizeKnown)
        let empty = try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 416, headers: ["content-range": "bytes */0"]))
        XCTAssertEqual(empty.size, 0)
        // S3's InvalidRange for an empty object has no Content-Range (issue 45, case 7).
        let emptyObject = try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 416, headers: [
            "content-type": "application/xml", "etag": "\"d41d8cd98f00b204e9800998ecf8427e\""]))
        XCTAssertEqual(emptyObject.size, 0)
        XCTAssertTrue(emptyObject.sizeKnown)
        XCTAssertThrowsError(try ProbedMetadata.read(url: "u", probeResponse: ResponseHead(status: 416, headers: [
            "content-range": "bytes */5"])), "a stated length is no empty file")
    }

    func testWithoutASizeOnlyTheValidatorsTellVersionsApart() {
        let known = RemoteMetadata(url: "u", size: 10, etag: "\"a\"", lastModified: "")
        XCTAssertTrue(RemoteMetadata.unsized(url: "u", etag: "\"a\"", lastModified: "").describesSameContent(as: known))
        XCTAssertFalse(RemoteMetadata.unsized(url: "u", etag: "\"b\"", lastModified: "").describesSameContent(as: known))
        let dated = RemoteMetadata(url: "u", size: 10, etag: "", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertTrue(dated.describesSameContent(as: .unsized(url: "u", etag: "", lastModified: dated.lastModified)))
        XCTAssertFalse(dated.describesSameContent(as: .unsized(url: "u", etag: "", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT")))
        XCTAssertFalse(known.describesSameContent(as: RemoteMetadata(url: "u", size: 11, etag: "\"a\"", lastModified: "")),
                       "two known sizes still must agree")
    }

    func testAServerErrorThroughAProxyNamesTheProxy() {
        let proxied = ResponseHead(status: 500, headers: [:], proxy: "http://p:3128")
        XCTAssertEqual(proxied.statusError, .proxyStatus(500, "http://p:3128"))
        XCTAssertTrue(proxied.statusError.userMessage.contains("through the proxy http://p:3128"))
        XCTAssertTrue(proxied.statusError.isTransient && proxied.statusError.isOriginUnreachable)
        XCTAssertThrowsError(try ProbedMetadata.read(url: "u", probeResponse: proxied)) {
            XCTAssertEqual($0 as? FetchError, .proxyStatus(500, "http://p:3128"))
        }
        XCTAssertEqual(ResponseHead(status: 404, headers: [:], proxy: "http://p:3128").statusError, .httpStatus(404),
                       "an answer about the file is the server's")
        XCTAssertEqual(ResponseHead(status: 502, headers: [:]).statusError, .httpStatus(502))
    }

    /// Issue 45, cases 1 and 8: what an answer's validators say against the cached version's.
    func testAnAnswerContradictsAVersionByWhatBothSidesState() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        let weak = RemoteMetadata(url: "u", size: 10, etag: "W/\"a\"", lastModified: "")
        XCTAssertTrue(weak.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "W/\"b\"", lastModified: "")))
        XCTAssertFalse(weak.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "W/\"a\"", lastModified: "")))
        XCTAssertFalse(weak.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "\"a\"", lastModified: "")),
                       "the weak comparison: the same opaque tag")
        XCTAssertFalse(weak.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "", lastModified: date)),
                       "nothing stated on both sides tells")
        let dated = RemoteMetadata(url: "u", size: 10, etag: "", lastModified: date)
        XCTAssertTrue(dated.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT")))
        XCTAssertTrue(dated.isContradicted(by: RemoteMetadata(url: "u", size: 11, etag: "", lastModified: date)))
        let bare = RemoteMetadata(url: "u", size: 10, etag: "", lastModified: "")
        XCTAssertFalse(bare.isContradicted(by: RemoteMetadata(url: "u", size: 10, etag: "\"x\"", lastModified: date)),
                       "a server with no validator can be told apart by its length only")
        // A rotated ETag is the same with or without a date on both sides; never with only one side dated.
        let strong = RemoteMetadata(url: "u", size: 10, etag: "\"n1\"", lastModified: "")
        XCTAssertTrue(strong.etagRotated(to: RemoteMetadata(url: "u", size: 10, etag: "\"n2\"", lastModified: "")))
        XCTAssertFalse(strong.etagRotated(to: RemoteMetadata(url: "u", size: 10, etag: "\"n2\"", lastModified: date)))
        XCTAssertFalse(strong.etagRotated(to: RemoteMetadata(url: "u", size: 11, etag: "\"n2\"", lastModified: "")))
    }

    func testWeakETagIsNotUsedForIfRange() {
        let weak = RemoteMetadata(url: "u", size: 1, etag: "W/\"x\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(weak.ifRangeValidator, "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    func testHTTPDateForms() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), 784_111_777)
        XCTAssertNil(HTTPDate.parse("yesterday"))
        XCTAssertEqual(HTTPDate.parse("sun, 06 NOV 1994 08:49:37 GMT"), 784_111_777, "a month in any case")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:xx:49:37 GMT"), "a clock of three numbers, no more")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08::37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, +6 Nov 1994 08:49:37 GMT"), "digits only")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 99999999999999999999 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 99999999999999999:00:00 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Né 1994 08:49:37 GMT"))
    }

    func testContentDispositionPrefersExtendedFilename() {
        XCTAssertEqual(ContentDisposition.filename(from: "attachment; filename=\"a.txt\"; filename*=UTF-8''%C3%A9t%C3%A9.txt"), "été.txt")
        XCTAssertEqual(ContentDisposition.filename(from: "inline; filename=plain.bin"), "plain.bin")
        XCTAssertNil(ContentDisposition.filename(from: "inline"))
    }

    func testARedirectToTheURLWithASlashMeansADirectory() {
        let listing = ResponseHead(status: 200, headers: ["content-type": "text/html"], effectiveURL: "http://h/pub/")
        XCTAssertThrowsError(try ProbedMetadata.read(url: "http://h/pub", probeResponse: listing)) { error in
            XCTAssertEqual(error as? FetchError, .isDirectory("http://h/pub/"))
        }
        // A redirect elsewhere (a login page, a CDN) is not a directory.
        let elsewhere = ResponseHead(status: 206, headers: ["content-range": "bytes 0-0/10"], effectiveURL: "http://cdn/x/")
        XCTAssertEqual(try ProbedMetadata.read(url: "http://h/pub", probeResponse: elsewhere).size, 10)
    }
}
