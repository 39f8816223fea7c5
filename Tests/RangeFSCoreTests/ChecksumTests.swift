@testable import RangeFSCore
import RangeFSTestSupport
import XCTest

final class ChecksumTests: XCTestCase {
    func testCRC32CMatchesTheStandardCheckValue() {
        XCTAssertEqual(CRC32C.checksum(Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(CRC32C.checksum([UInt8]()), 0)
    }

    func testCRC32CContinuesAcrossPieces() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let whole = CRC32C.checksum(bytes)
        let first = CRC32C.checksum(bytes[..<333])
        XCTAssertEqual(CRC32C.checksum(bytes[333...], initial: first), whole)
    }

    func testHardwareAndTableVersionsAgree() {
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 4096, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 9, 65536, 65536 + 3, 1 << 20] {
            let bytes = pseudoRandomBytes(count: length, seed: UInt64(length))
            bytes.withUnsafeBytes { raw in
                XCTAssertEqual(CRC32C.checksum(raw, initial: 12345), CRC32C.tableChecksum(raw, initial: 12345), "length \(length)")
            }
        }
    }

    func testSHA256MatchesFIPSVectors() {
        XCTAssertEqual(SHA256.hexDigest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hexDigest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hexDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}
