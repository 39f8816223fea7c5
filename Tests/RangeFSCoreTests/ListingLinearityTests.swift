@testable import RangeFSCatalog
@testable import RangeFSFetch
import Synchronization
import XCTest

/// Issue 45, case 5: listings that cannot hang a mount. A page whose links share one line (a minified page) is read
/// in work proportional to its size, counted in bytes looked at (`ParsedListing.bytesExamined`), not timed; and a
/// listing that does not arrive within its deadline fails with a message that names the option.
final class ListingLinearityTests: XCTestCase {
    let base = "http://127.0.0.1:8080/pub/"

    /// nginx's line for file `index`, as its HTML autoindex writes it (size and date after the link).
    func nginxLine(_ index: Int) -> String {
        "<a href=\"file-\(index).bin\">file-\(index).bin</a>                    23-Nov-2026 10:00             \(index)"
    }

    func page(_ count: Int, separator: String) -> [UInt8] {
        let links = (0..<count).map(nginxLine).joined(separator: separator)
        return Array("<html><body><pre><a href=\"../\">../</a>\(separator)\(links)\(separator)</pre></body></html>".utf8)
    }

    func testLinksOnOneLineCostWorkInProportionToThePage() {
        // Before: each link's size and date were read from the rest of its line, so 4,000 links on one line cost
        // about 2,000 times the page (n²/2 bytes looked at); the ratio between 1,000 and 4,000 links was 16.
        for separator in ["", " ", "\n"] {
            var examined: [Int] = []
            for count in [1000, 4000] {
                let body = page(count, separator: separator)
                let listing = DirectoryListing.parse(body, base: base)
                XCTAssertEqual(listing.entries.count, count, "separator \(separator.debugDescription)")
                XCTAssertLessThanOrEqual(
                    listing.bytesExamined,
                    DirectoryListing.examinedPerByte * body.count + DirectoryListing.examinedSlack,
                    "\(count) links, separator \(separator.debugDescription): \(listing.bytesExamined) bytes looked at "
                        + "for a page of \(body.count)")
                examined.append(listing.bytesExamined)
                print("\(count) links, separator \(separator.debugDescription): \(body.count) bytes, \(listing.bytesExamined) looked at")
            }
            // Four times the links, four times the work (linear), with room; quadratic would be 16.
            XCTAssertLessThan(Double(examined[1]) / Double(examined[0]), 5, "separator \(separator.debugDescription)")
        }
    }

    func testOneLineAndOneLinkPerLineGiveTheSameChildren() {
        let lines = DirectoryListing.parse(page(300, separator: "\n"), base: base)
        let oneLine = DirectoryListing.parse(page(300, separator: ""), base: base)
        XCTAssertEqual(oneLine.entries.map(\.url), lines.entries.map(\.url))
        XCTAssertEqual(oneLine.entries.map(\.name), lines.entries.map(\.name))
        // One per line, nginx's columns give each file's size; on one line the rest of the line is other links.
        XCTAssertEqual(lines.entries.last?.size, 299)
        XCTAssertNil(oneLine.entries.last?.size)
    }

    func testASizeAndDateAreNotReadPastATag() {
        // The fields end at the line's end or at the next tag: a `<` is no part of a size or a date.
        let listing = DirectoryListing.parse(Array("""
            <a href="a.bin">a.bin</a>  23-Nov-2026 10:00  5<br>
            <a href="b.bin">b.bin</a>  23-Nov-2026 10:00  7
            <a href="c.bin">c.bin</a>  23-Nov-2026 10:0x:00  9

            """.utf8), base: base)
        XCTAssertEqual(listing.entries.map(\.name), ["a.bin", "b.bin", "c.bin"])
        XCTAssertEqual(listing.entries.map(\.size), [nil, 7, nil])
    }

    // MARK: The deadline

    /// A clock the test moves.
    final class FakeClock: Sendable {
        let now = Mutex(100.0)
        func read() -> Double { now.withLock { $0 } }
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
    }

    func testAListingStillArrivingAtItsDeadlineFailsWithTheOption() {
        let clock = FakeClock()
        let outcome = Mutex<Result<(status: Int, body: [UInt8], cut: Bool), FetchError>?>(nil)
        let sink = ListingSink(limit: 8 << 20, deadline: ListingDeadline(seconds: 600, clock: clock.read)) { result in
            outcome.withLock { $0 = result }
        }
        XCTAssertTrue(sink.receive(head: ResponseHead(status: 200, headers: [:])))
        let piece = [UInt8](repeating: UInt8(ascii: "x"), count: 2048)
        // A trickle of 2 KiB a second: above the low-speed floor, and without end.
        for _ in 0..<599 {
            XCTAssertTrue(piece.withUnsafeBytes { sink.receive(body: $0) })
            clock.advance(1)
        }
        clock.advance(1)
        XCTAssertFalse(piece.withUnsafeBytes { sink.receive(body: $0) }, "the deadline ends the transfer")
        sink.complete(error: .cancelled)
        guard case .failure(let error)? = outcome.withLock({ $0 }) else { return XCTFail("the listing did not fail") }
        XCTAssertEqual(error, .listingTimedOut(600))
        XCTAssertTrue(error.userMessage.contains("within 600 s") && error.userMessage.contains("--listing-timeout"),
                      error.userMessage)
        XCTAssertFalse(error.isTransient, "a listing that took its whole deadline is not asked again at once")
    }

    func testAHeadAfterTheDeadlineFails() {
        // A server that took the whole time to answer (through its redirects) is not read.
        let clock = FakeClock()
        let outcome = Mutex<FetchError?>(nil)
        let sink = ListingSink(limit: 1 << 20, deadline: ListingDeadline(seconds: 5, clock: clock.read)) { result in
            if case .failure(let error) = result { outcome.withLock { $0 = error } }
        }
        clock.advance(5)
        XCTAssertFalse(sink.receive(head: ResponseHead(status: 200, headers: [:])))
        sink.complete(error: .cancelled)
        XCTAssertEqual(outcome.withLock { $0 }, .listingTimedOut(5))
    }
}
