@testable import RangeFSCache
@testable import RangeFSFetch
import XCTest

/// Issue 38: which bytes an answer carries (ResponseHead+Range.swift), the one place every reader of an answer
/// asks. `rclone serve s3` (1.75) answers a Range GET with 200 and only the range, with its Content-Range: that is
/// a part, exactly when the Content-Range is the range asked for.
final class CarriedBytesTests: XCTestCase {
    func head(_ status: Int, _ headers: [String: String]) -> ResponseHead {
        ResponseHead(status: status, headers: headers)
    }

    /// rclone's answer to `Range: bytes=0-99` of a 3,893-byte object, as measured (docs: s3servers38.md §3.2).
    let rclone: [String: String] = ["content-range": "bytes 0-99/3893", "content-length": "100",
                                    "etag": "\"53d025127ae99ab79e8502aae2d9bea6\""]

    func testA200WithExactlyTheRangeAskedIsThatPart() {
        let part = ContentRange(range: 0..<100, completeLength: 3893)
        XCTAssertEqual(head(200, rclone).carriedBytes(asked: 0..<100), .part(part))
        XCTAssertEqual(head(206, rclone).carriedBytes(asked: 0..<100), .part(part), "as a 206 with it")
        // An ask past the end is answered up to the file's last byte (rclone: bytes=3800-5000).
        XCTAssertEqual(head(200, ["content-range": "bytes 3800-3892/3893"]).carriedBytes(asked: 3800..<5001),
                       .part(ContentRange(range: 3800..<3893, completeLength: 3893)))
        XCTAssertEqual(head(200, ["content-range": "bytes 10-19/*"]).carriedBytes(asked: 10..<20),
                       .part(ContentRange(range: 10..<20, completeLength: nil)), "an unknown total: the exact ask")
    }

    func testA200WithAnotherContentRangeIsAWrongRange() {
        XCTAssertEqual(head(200, rclone).carriedBytes(asked: 100..<200), .wrongRange("bytes 0-99/3893"),
                       "another first byte")
        XCTAssertEqual(head(200, rclone).carriedBytes(asked: 0..<200), .wrongRange("bytes 0-99/3893"),
                       "less than asked, within the file: a 206 may, a 200 names no such part")
        XCTAssertEqual(head(200, ["content-range": "bytes 10-14/*"]).carriedBytes(asked: 10..<20),
                       .wrongRange("bytes 10-14/*"), "an unknown total tells no end of the file")
        XCTAssertEqual(head(200, ["content-range": "bytes 0-99/3893"]).carriedBytes(asked: nil),
                       .wrongRange("bytes 0-99/3893"), "a part to a request without Range")
        XCTAssertEqual(head(200, ["content-range": "bytes lots"]).carriedBytes(asked: 0..<100),
                       .wrongRange("bytes lots"), "unreadable")
        XCTAssertEqual(head(200, ["content-range": "bytes */3893"]).carriedBytes(asked: 0..<100),
                       .wrongRange("bytes */3893"), "no range")
        XCTAssertEqual(head(200, ["content-range": "bytes 0-3892/3893", "content-length": "100"])
            .carriedBytes(asked: 100..<200), .wrongRange("bytes 0-3892/3893"), "the whole file, in 100 bytes")
    }

    func testA200WithoutAContentRangeOrWithTheWholeFilesIsTheWholeFile() {
        XCTAssertEqual(head(200, ["content-length": "3893"]).carriedBytes(asked: 0..<100), .wholeFile)
        XCTAssertEqual(head(200, [:]).carriedBytes(asked: 0..<100), .wholeFile, "chunked")
        XCTAssertEqual(head(200, ["content-length": "3893"]).carriedBytes(asked: nil), .wholeFile)
        XCTAssertEqual(head(200, ["content-range": "bytes 0-3892/3893", "content-length": "3893"])
            .carriedBytes(asked: 100..<200), .wholeFile, "a server that ignores Range and names the whole file")
    }

    func testA206NeedsARangeAskedAndAReadableContentRange() {
        XCTAssertEqual(head(206, ["content-range": "bytes 0-9/20"]).carriedBytes(asked: nil),
                       .wrongRange("206 to a request without Range"))
        XCTAssertEqual(head(206, [:]).carriedBytes(asked: 0..<10), .wrongRange("(missing)"))
        XCTAssertEqual(head(206, ["content-range": "bytes 0-4/20"]).carriedBytes(asked: 0..<10),
                       .part(ContentRange(range: 0..<5, completeLength: 20)), "a 206 may bring less")
        XCTAssertEqual(head(404, [:]).carriedBytes(asked: 0..<10), .otherStatus)
        XCTAssertEqual(head(416, ["content-range": "bytes */0"]).carriedBytes(asked: 0..<1), .otherStatus)
    }

    func testAPartFitsAnAskWhenItStartsThereAndEndsWithin() {
        XCTAssertTrue(ContentRange(range: 0..<5, completeLength: 20).fits(0..<10))
        XCTAssertTrue(ContentRange(range: 0..<10, completeLength: 20).fits(0..<10))
        XCTAssertFalse(ContentRange(range: 1..<10, completeLength: 20).fits(0..<10))
        XCTAssertFalse(ContentRange(range: 0..<11, completeLength: 20).fits(0..<10))
        XCTAssertFalse(ContentRange(range: nil, completeLength: 20).fits(0..<10))
    }

    /// The probe (`bytes=0-0`) of an rclone object: the size is the Content-Range's total, not the 1 byte sent.
    func testAProbeAnsweredWith200AndItsRangeTakesTheSizeFromTheContentRange() throws {
        let probed = head(200, ["content-range": "bytes 0-0/3893", "content-length": "1", "etag": "\"e\"",
                                "last-modified": "Thu, 26 Nov 2026 04:08:04 GMT"])
        let metadata = try ProbedMetadata.read(url: "http://127.0.0.1:1/bucket/f", probeResponse: probed)
        XCTAssertEqual(metadata.size, 3893)
        XCTAssertTrue(metadata.sizeKnown)
        XCTAssertEqual(metadata.etag, "\"e\"")
        let first = try ProbedMetadata.read(url: "u", probeResponse: head(200, rclone), asked: 0..<100)
        XCTAssertEqual(first.size, 3893, "a probe that asked for its first bytes")
        let whole = try ProbedMetadata.read(url: "u", probeResponse: head(200, ["content-length": "42"]))
        XCTAssertEqual(whole.size, 42, "without a Content-Range a 200 is still the whole file")
        XCTAssertThrowsError(try ProbedMetadata.read(url: "u", probeResponse: head(200, ["content-range": "bytes 5-5/3893",
                                                                                     "content-length": "1"]))) {
            XCTAssertEqual($0 as? FetchError, .badContentRange("bytes 5-5/3893"), "not the byte asked for")
        }
    }
}
