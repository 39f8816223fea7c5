@testable import RangeFSSystem
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

    /// The fixed form is read in place, at its fixed places (a LOOKUP after a remount parses its file's date):
    /// for every date, and for every one-byte change of one, it answers what the field-by-field parse answers.
    func testTheFixedFormsFastReadAgreesWithTheGeneralParse() {
        let alphabet = Array("0123456789 ,-:GMTgmtJanDecSunx\u{00}é".utf8)
        var generator = SystemRandomNumberGenerator()
        var seconds: Int64 = -30_000_000_000
        var changed = 0, accepted = 0
        while seconds < 250_000_000_000 {
            let text = HTTPDate.format(seconds)
            XCTAssertEqual(HTTPDate.parse(text), HTTPDate.parseFields(text), text)
            XCTAssertEqual(HTTPDate.parse(text.lowercased()), HTTPDate.parseFields(text.lowercased()), text)
            var bytes = Array(text.utf8)
            bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            let mutated = String(decoding: bytes, as: UTF8.self)
            XCTAssertEqual(HTTPDate.parse(mutated), HTTPDate.parseFields(mutated), mutated)
            changed += 1
            if HTTPDate.parse(mutated) != nil { accepted += 1 }
            seconds += 86_400 * 37 + 3_671
        }
        XCTAssertGreaterThan(accepted, 0, "some changes still spell a date (another digit)")
        XCTAssertLessThan(accepted, changed)
        // Out of range, in the fixed form: refused by both.
        for text in ["Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:60:37 GMT",
                     "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Xyz 1994 08:49:37 GMT"] {
            XCTAssertNil(HTTPDate.parse(text), text)
            XCTAssertNil(HTTPDate.parseFields(text), text)
        }
        XCTAssertEqual(HTTPDate.parse("sun, 06 NOV 1994 08:49:60 gmt"), HTTPDate.parseFields("sun, 06 NOV 1994 08:49:60 gmt"))
    }
}
