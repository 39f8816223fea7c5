import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 39: the totals statfs answers every `df` with (files and their sizes added up) are kept by the catalog as
/// files come and go, and always equal a walk of every file.
final class CatalogTotalsTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "catalog-totals")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// Checks the kept totals against a walk of every file.
    func assertTotalsMatchAWalk(_ catalog: Catalog, _ step: String, line: UInt = #line) {
        let items = catalog.items
        let walked = items.reduce(UInt64(0)) { $0 + $1.metadata.size }
        let kept = catalog.totals
        XCTAssertEqual(kept.files, items.count, "files, after \(step)", line: line)
        XCTAssertEqual(kept.bytes, walked, "bytes, after \(step)", line: line)
    }

    func metadata(_ name: String, size: UInt64) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/\(name)", size: size, etag: "\"1\"", lastModified: "")
    }

    func testTotalsFollowAddsUpdatesAndRemovals() {
        let catalog = Catalog()
        assertTotalsMatchAWalk(catalog, "nothing")
        let a = catalog.add(metadata("a.bin", size: 1000))
        catalog.add(metadata("b.bin", size: 2000))
        catalog.add(metadata("a.bin", size: 1000))  // the same URL twice: two files, both counted
        let folder = catalog.folder(["sub"])
        let inFolder = catalog.add(metadata("c.bin", size: 4000), parent: folder)
        catalog.add(metadata("d.bin", size: 8000), parent: folder)
        assertTotalsMatchAWalk(catalog, "adds")
        XCTAssertEqual(catalog.totals.bytes, 16_000)

        catalog.update(inode: a.inode, metadata: metadata("a.bin", size: 1500))  // the remote file grew
        catalog.updateListed(inode: inFolder.inode, metadata: metadata("c.bin", size: 3000), listedTime: nil)
        catalog.update(inode: inFolder.inode, metadata: metadata("moved/c.bin", size: 3500))  // another URL
        assertTotalsMatchAWalk(catalog, "updates")

        catalog.removeNode(a.inode)
        catalog.remove(named: "b.bin")
        assertTotalsMatchAWalk(catalog, "removals of files")
        catalog.removeNode(folder)  // with the two files under it
        assertTotalsMatchAWalk(catalog, "the removal of a folder")
        XCTAssertEqual(catalog.totals.files, 1)
        XCTAssertEqual(catalog.totals.bytes, 1000)
    }

    /// Fills and evictions change what is cached, never the totals statfs gives (sizes and files): they stay
    /// those of a walk while blocks come and go under a 4-block cache cap.
    func testTotalsStayThoseOfAWalkThroughFillsAndEvictions() throws {
        let origin = MemoryOrigin()
        let urls = ["http://origin/one.bin", "http://origin/two.bin"]
        for (index, url) in urls.enumerated() { origin.serve(url, bytes: pseudoRandomBytes(count: 6 * 65536, seed: UInt64(index))) }
        var settings = StoreSettings()
        settings.maxBytes = 4 * 65536
        let fileSystem = try makeTestFileSystem(origin: origin, urls: urls, directory: directory.path,
                                                storeSettings: settings)
        let evictedBefore = fileSystem.metrics.value("rangefs_evicted_bytes_total")
        assertTotalsMatchAWalk(fileSystem.catalog, "the mount")
        for name in ["one.bin", "two.bin"] {
            let inode = try XCTUnwrap(fileSystem.catalog.item(named: name)).inode
            let handle = try fileSystem.open(inode).get().handle
            for block in 0..<6 {
                let read = fileSystem.readSynchronously(handle: handle, offset: UInt64(block * 65536), count: 65536)
                XCTAssertEqual(try XCTUnwrap(read).get().count, 65536)
            }
            fileSystem.release(handle)
            // Written before the next file needs room: a block still on its way to the disk is not evicted, and on
            // a loaded machine the writer could lag behind all six (CI saw no eviction at all).
            fileSystem.store.waitForWrites()
            assertTotalsMatchAWalk(fileSystem.catalog, "the fill of \(name)")
        }
        XCTAssertGreaterThan(fileSystem.metrics.value("rangefs_evicted_bytes_total"), evictedBefore, "blocks were evicted")
        assertTotalsMatchAWalk(fileSystem.catalog, "evictions")
        XCTAssertEqual(fileSystem.catalog.totals.bytes, 12 * 65536)
        XCTAssertEqual(fileSystem.catalog.totals.files, 2)
    }
}
