@testable import RangeFSCache
import XCTest

/// Issue 45, case 14: `status` showed 64 MiB/s for a copy running at 16 (a readahead burst in a 250 ms sample),
/// and 0 between bursts. The rate is taken over the last seconds of stored bytes instead.
final class TransferRateTests: XCTestCase {
    func testBurstsOfReadaheadGiveThePaceOfTheCopy() {
        var rate = TransferRate()
        // A copy at 16 MiB/s whose readahead fetches 8 MiB in one 50 ms burst every half second.
        var time = 1000.0
        while time < 1010 {
            for step in 0..<8 { rate.add(1 << 20, at: time + Double(step) * 0.006) }
            time += 0.5
        }
        for probe in stride(from: 1006.0, to: 1010.0, by: 0.13) {
            let mebibytes = rate.rate(at: probe) / Double(1 << 20)
            XCTAssertEqual(mebibytes, 16, accuracy: 2.5, "at \(probe): \(mebibytes) MiB/s")
        }
    }

    func testARateStartsAtOnceAndFallsToZeroWhenTheBytesStop() {
        var rate = TransferRate()
        XCTAssertEqual(rate.rate(at: 50), 0)
        rate.add(4 << 20, at: 100)
        rate.add(4 << 20, at: 101)
        XCTAssertEqual(rate.rate(at: 102) / Double(1 << 20), 4, accuracy: 0.01, "8 MiB over the 2 s since the start")
        XCTAssertEqual(rate.rate(at: 104.5) / Double(1 << 20), 1, accuracy: 0.01, "4 MiB in the last 4 s")
        XCTAssertEqual(rate.rate(at: 105.3), 0, "nothing in the last 4 s")
        rate.add(1 << 20, at: 300)
        XCTAssertEqual(rate.rate(at: 301) / Double(1 << 20), 0.25, accuracy: 0.01, "old buckets were emptied")
    }
}
