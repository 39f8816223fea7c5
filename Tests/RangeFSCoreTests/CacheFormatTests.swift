@testable import RangeFSCache
@testable import RangeFSSystem
import XCTest

final class CacheFormatTests: XCTestCase {
    let header = CacheHeader(blockSize: 65536, size: 1_000_000, generation: 0xDEAD_BEEF, url: "http://h/f",
                             etag: "\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")

    func testHeaderRoundTripsAndStartsWithMagic() throws {
        let encoded = header.encoded()
        XCTAssertEqual(Array(encoded.prefix(8)), Array("RFSHEAD1".utf8))
        XCTAssertEqual(try CacheHeader.decode(encoded), header)
        XCTAssertEqual(header.blockCount, 16)
    }

    func testHeaderFieldsAreLittleEndian() {
        let encoded = header.encoded()
        XCTAssertEqual(Array(encoded[8..<12]), [1, 0, 0, 0], "version 1")
        XCTAssertEqual(Array(encoded[12..<16]), [0, 0, 1, 0], "block size 65536")
    }

    func testAnyFlippedByteIsDetected() {
        let encoded = header.encoded()
        for index in encoded.indices {
            var damaged = encoded
            damaged[index] ^= 0x40
            XCTAssertThrowsError(try CacheHeader.decode(damaged), "byte \(index)")
        }
    }

    func testTruncatedFilesAreRejected() {
        let encoded = header.encoded()
        for length in [0, 4, 11, encoded.count - 1] {
            XCTAssertThrowsError(try CacheHeader.decode(Array(encoded.prefix(length))))
        }
    }

    func testStreamRecordRoundTripsAndRejectsDamage() throws {
        let record = StreamRecord(length: 5_000_000_000, url: "http://h/s", etag: "", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        let encoded = record.encoded()
        XCTAssertEqual(Array(encoded.prefix(8)), Array("RFSSTRM1".utf8))
        XCTAssertEqual(try StreamRecord.decode(encoded), record)
        var damaged = encoded
        damaged[14] ^= 1
        XCTAssertThrowsError(try StreamRecord.decode(damaged))
    }

    func testBitmapRecordRoundTrip() throws {
        var present = BlockBitmap(blockCount: 16)
        [0, 5, 15].forEach { present.insert($0) }
        let record = BitmapRecord(blockSize: 65536, generation: 7, present: present)
        XCTAssertEqual(try BitmapRecord.decode(record.encoded()), record)
        var damaged = record.encoded()
        damaged[32] ^= 1
        XCTAssertThrowsError(try BitmapRecord.decode(damaged)) { error in
            XCTAssertEqual(error as? FormatError, .checksumMismatch)
        }
    }
}
