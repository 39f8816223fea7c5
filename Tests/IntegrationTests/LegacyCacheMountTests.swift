import Foundation
import Glibc
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46, acceptance 5: a cache that a rangefs before format v2 made (v1 folders) mounts, and keeps its data.
final class LegacyCacheMountTests: MountTestCase {
    func testACacheInTheV1LayoutMountsServesWhatItHoldsAndFetchesOnlyTheRest() throws {
        let size = 8 << 20
        let smallDigest = try origin.serveRandomFile("v1-small.bin", size: 300_000)
        let largeDigest = try origin.serveRandomFile("v1-large.bin", size: size)
        let (small, large) = (origin.url("v1-small.bin"), origin.url("v1-large.bin"))
        try mount([small, large], extra: ["--prefetch", "none"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/v1-small.bin"), smallDigest)
        _ = try fileBytes(mountpoint + "/v1-large.bin", offset: 0, count: 2 << 20)
        try driver.unmount(mountpoint, cache: cache)
        try driver.waitForUnlock(cache)

        // The same cache as an older rangefs would have left it: each entry a v1 folder.
        let smallFolder = try convertToLegacyEntry(root: cache, url: small)
        let largeFolder = try convertToLegacyEntry(root: cache, url: large)
        let bitmap = try BitmapRecord.decode(try XCTUnwrap(FileSystemCalls.readSmallFile(largeFolder + "/bitmap")))
        let missing = UInt64(size) - UInt64(bitmap.present.setCount) * 65536
        XCTAssertGreaterThan(missing, 0, "the large file is partly cached")
        XCTAssertEqual(EntryFiles.all(root: cache).map(\.base).filter { access($0, F_OK) == 0 }, [], "no v2 entry")

        origin.clearAccessLog()
        try mount([small, large], extra: ["--prefetch", "none"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/v1-small.bin"), smallDigest)
        XCTAssertEqual(origin.accessLog().filter { $0.path == "/v1-small.bin" && $0.range != "bytes=0-0" }, [],
                       "the complete file is read from the migrated cache, without a request for its bytes")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/v1-large.bin"), largeDigest)
        let fetched = bytesFetched("/v1-large.bin")
        XCTAssertLessThanOrEqual(fetched, missing, "only the blocks the v1 entry did not hold are fetched")
        XCTAssertGreaterThan(fetched, 0)
        try driver.unmount(mountpoint, cache: cache)

        XCTAssertNotEqual(access(smallFolder, F_OK), 0, "migrated: the v1 folder is gone")
        XCTAssertNotEqual(access(largeFolder, F_OK), 0, "migrated: the v1 folder is gone")
        XCTAssertEqual(access(EntryFiles(root: cache, url: small).base, F_OK), 0)
        XCTAssertEqual(access(EntryFiles(root: cache, url: large).dataPath, F_OK), 0)
    }
}
