@testable import RangeFSCache
import XCTest

final class BlockBitmapTests: XCTestCase {
    func testInsertRemoveAndCount() {
        var bitmap = BlockBitmap(blockCount: 130)
        XCTAssertTrue(bitmap.insert(0))
        XCTAssertTrue(bitmap.insert(129))
        XCTAssertFalse(bitmap.insert(129))
        XCTAssertEqual(bitmap.setCount, 2)
        XCTAssertTrue(bitmap.contains(129))
        XCTAssertTrue(bitmap.remove(0))
        XCTAssertFalse(bitmap.contains(0))
        XCTAssertEqual(bitmap.setCount, 1)
    }

    func testPackedBytesRoundTrip() {
        var bitmap = BlockBitmap(blockCount: 77)
        for index in stride(from: 0, to: 77, by: 3) { bitmap.insert(index) }
        let packed = bitmap.packedBytes
        XCTAssertEqual(packed.count, 10)
        XCTAssertEqual(BlockBitmap(blockCount: 77, packedBytes: packed), bitmap)
    }

    func testClearRunsFindsGaps() {
        var bitmap = BlockBitmap(blockCount: 10)
        [2, 3, 7].forEach { bitmap.insert($0) }
        XCTAssertEqual(bitmap.clearRuns(in: 0..<10), [0..<2, 4..<7, 8..<10])
        XCTAssertEqual(bitmap.clearRuns(in: 2..<4), [])
        XCTAssertTrue(bitmap.containsAll(2..<4))
    }
}
