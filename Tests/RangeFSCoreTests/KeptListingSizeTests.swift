import Foundation
import Logging
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 46: a directory of a million entries remounts offline. Its kept listing (a million objects' records, 122 MB
/// for short names) must be read back at the remount; on main anything above 64 MiB read as no kept listing at all,
/// so the million-object tree showed nothing with its server down.
final class KeptListingSizeTests: XCTestCase {
    func testAKeptListingLargerThan64MiBIsReadBack() throws {
        let directory = try TemporaryDirectory(prefix: "kept-listing")
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let record = Array(#"{"name":"photo-0000000.jpg","size":1,"mod_time":"2026-11-01T10:00:00.000Z"},"#.utf8)
        var body: [UInt8] = [UInt8(ascii: "[")]
        let count = (72 << 20) / record.count
        body.reserveCapacity(count * record.count + 2)
        for _ in 0..<count { body += record }
        body[body.count - 1] = UInt8(ascii: "]")
        let url = "http://127.0.0.1:9/bkt/many/"
        try store.saveListing(body, for: url)
        let kept = store.savedListing(for: url)
        XCTAssertEqual(kept?.count, body.count, "a kept listing of \(body.count >> 20) MiB is read back whole")
    }
}
