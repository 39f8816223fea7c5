import Foundation
@testable import RangeFSFetch
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Replays the seeds and regressions of the ResponseHead and Redaction fuzz targets (issue 45) through the same
/// property functions their harnesses call (Tests/RangeFSTestSupport/FuzzProperties.swift).
final class FuzzHeadRegressionTests: XCTestCase {
    /// Every kept input of `target` (its seeds, and its regressions where there are any), by name.
    private func inputs(of target: String) throws -> [(name: String, bytes: [UInt8])] {
        let found = try FuzzInputs.all(of: target)
        XCTAssertFalse(found.isEmpty, "no inputs kept for \(target)")
        return found
    }

    func testResponseHeadInputs() throws {
        for (name, bytes) in try inputs(of: "ResponseHead") {
            XCTAssertNil(responseHeadPropertyBroken(bytes), name)
        }
        // The multipart seed is refused, and would be a broken property if it were trusted.
        XCTAssertNil(responseHeadPropertyBroken(Array("206 0 9\ncontent-type: Multipart/ByteRanges; boundary=b\ncontent-range: bytes 0-9/10\ncontent-length: 10\n".utf8)))
    }

    func testRedactionInputs() throws {
        for (name, bytes) in try inputs(of: "Redaction") {
            XCTAssertNil(redactionPropertyBroken(bytes), name)
        }
    }
}
