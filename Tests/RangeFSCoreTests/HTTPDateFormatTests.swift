@testable import RangeFSCore
import XCTest

/// HTTPDate.format writes a four-digit year's date from bytes in place (a million listed files' dates per
/// `ls -l`); what it writes is the IMF-fixdate it always wrote, and reads back as the same second.
final class HTTPDateFormatTests: XCTestCase {
    func testDatesAreIMFFixdatesThatReadBackTheSame() {
        XCTAssertEqual(HTTPDate.format(0), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(1_795_666_084), "Thu, 26 Nov 2026 04:08:04 GMT")
        XCTAssertEqual(HTTPDate.format(-1), "Wed, 31 Dec 1969 23:59:59 GMT")
        XCTAssertEqual(HTTPDate.format(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(253_402_300_799), "Fri, 31 Dec 9999 23:59:59 GMT")
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        var seconds: Int64 = -30_000_000_000
        while seconds < 250_000_000_000 {
            let text = HTTPDate.format(seconds)
            XCTAssertEqual(text.utf8.count, 29, text)
            XCTAssertEqual(HTTPDate.parse(text), seconds, text)
            let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
            XCTAssertEqual(String(text.prefix(3)), weekdays[Int((days % 7 + 7) % 7)], text)
            seconds += 86_400 * 37 + 3_671
        }
    }
}
