@testable import RangeFSCore
import XCTest

final class ReadaheadWindowTests: XCTestCase {
    func testSequentialReadsGrowTheWindowToItsCap() {
        var window = ReadaheadWindow(minimum: 1 << 20, maximum: 8 << 20)
        var offsets: [UInt64] = []
        for index in 0..<8 { offsets.append(window.observe(offset: UInt64(index) * 131_072, count: 131_072)) }
        XCTAssertEqual(offsets, [0, 0, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 8 << 20, 8 << 20])
    }

    func testSlightlyReorderedReadsStaySequential() {
        var window = ReadaheadWindow()
        _ = window.observe(offset: 0, count: 131_072)
        _ = window.observe(offset: 262_144, count: 131_072)
        XCTAssertGreaterThan(window.observe(offset: 131_072, count: 131_072), 0)
    }

    func testRandomReadsNeverReadAhead() {
        var window = ReadaheadWindow()
        for offset: UInt64 in [5 << 20, 100 << 20, 3 << 20, 200 << 20, 40 << 20] {
            XCTAssertEqual(window.observe(offset: offset, count: 4096), 0)
        }
    }
}
