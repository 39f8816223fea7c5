@testable import RangeFSSystem
import XCTest

/// The dates of object stores' and Caddy's listings. The form object stores write is read from its bytes (a
/// million of them per listing); every other form by the general reader, and both agree where both read.
final class RFC3339Tests: XCTestCase {
    func testTheCanonicalFormAndTheOthersReadTheSameInstant() {
        let instant: Int64 = 1_795_666_084  // 2026-11-26T04:08:04Z
        for text in ["2026-11-26T04:08:04Z", "2026-11-26T04:08:04.710Z", "2026-11-26T04:08:04.000000001Z",
                     "2026-11-26T04:08:04z", "2026-11-26T05:08:04+01:00", "2026-11-26T04:08:04.5-00:00",
                     "2026-11-26T04:08:04.Z"] {
            XCTAssertEqual(RFC3339.parse(text), instant, text)
        }
        XCTAssertEqual(RFC3339.parse("1970-01-01T00:00:00Z"), 0)
        XCTAssertEqual(RFC3339.parse("1969-12-31T23:59:59Z"), -1)
        XCTAssertEqual(RFC3339.parse("2024-02-29T12:00:00Z"), 1_709_208_000)
    }

    func testWhatIsNoDateIsRefused() {
        for text in ["2026-13-26T04:08:04Z", "2026-11-32T04:08:04Z", "2026-11-26T24:08:04Z", "2026-11-26T04:60:04Z",
                     "2026-11-26T04:08:61Z", "2026-11-26 04:08:04Z", "2026-11-26T04:08Z", "2026-1a-26T04:08:04Z",
                     "", "Z", "2026-11-26T04:08:04+25:00"] {
            XCTAssertNil(RFC3339.parse(text), text)
        }
    }
}
