@testable import RangeFSSystem
import XCTest

/// The HMAC-SHA256 object-store signatures are built from, against RFC 4231's published test cases.
final class HMACTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded }.joined() }

    func testRFC4231TestCases() {
        // Test case 1: a 20-byte key of 0x0b.
        XCTAssertEqual(hex(HMACSHA256.authenticate(key: [UInt8](repeating: 0x0b, count: 20),
                                                   message: Array("Hi There".utf8))),
                       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        // Test case 2: a key shorter than the output.
        XCTAssertEqual(hex(HMACSHA256.authenticate(key: Array("Jefe".utf8),
                                                   message: Array("what do ya want for nothing?".utf8))),
                       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a 131-byte key, longer than SHA-256's 64-byte block, so it is hashed first.
        XCTAssertEqual(hex(HMACSHA256.authenticate(
            key: [UInt8](repeating: 0xaa, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))),
                       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    func testEmptyKeyAndMessageAreHashedNotRefused() {
        // An empty array may have no storage: the call must still hash the empty key and message.
        // The value is Python's hmac.new(b"", b"", sha256).
        XCTAssertEqual(hex(HMACSHA256.authenticate(key: [], message: [])),
                       "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }
}

private extension String {
    /// A byte's hex as two digits.
    var leftPadded: String { count == 1 ? "0" + self : self }
}
