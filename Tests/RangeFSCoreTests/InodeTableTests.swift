@testable import RangeFSCache
@testable import RangeFSCatalog
import XCTest

/// The catalog's files by inode: an array indexed by the number, with empty slots for directories and removed files.
final class InodeTableTests: XCTestCase {
    func testSlotsFillSparselyAndEmptyAgain() {
        var table = InodeTable<String>(first: 2)
        XCTAssertNil(table[1])
        XCTAssertNil(table[2])
        XCTAssertNil(table.updateValue("five", forKey: 5))
        XCTAssertNil(table.updateValue("two", forKey: 2))
        XCTAssertEqual(table.count, 2)
        XCTAssertNil(table[3], "a number never given a value (a directory's) is empty")
        XCTAssertNil(table[6], "past the end")
        XCTAssertEqual(table[5], "five")
        XCTAssertEqual(table.updateValue("FIVE", forKey: 5), "five", "replacing returns what was there")
        XCTAssertEqual(table.count, 2)
        XCTAssertEqual(table.values, ["two", "FIVE"], "in inode order")
        XCTAssertEqual(table.removeValue(forKey: 2), "two")
        XCTAssertNil(table.removeValue(forKey: 2), "removing twice")
        XCTAssertNil(table.removeValue(forKey: 1), "below the first number")
        XCTAssertNil(table.removeValue(forKey: 99), "past the end")
        XCTAssertEqual(table.count, 1)
        XCTAssertNil(table[2])
        XCTAssertEqual(table.values, ["FIVE"])
    }

    /// The catalog's own numbering, through its public calls: a file's number after a removal is a fresh one, and
    /// the count and lookups see only the files held.
    func testTheCatalogKeepsNumbersOfRemovedFilesEmpty() {
        let catalog = Catalog()
        let first = catalog.add(RemoteMetadata(url: "http://h/a", size: 1, etag: "", lastModified: ""))
        let second = catalog.add(RemoteMetadata(url: "http://h/b", size: 2, etag: "", lastModified: ""))
        catalog.removeNode(first.inode)
        let third = catalog.add(RemoteMetadata(url: "http://h/c", size: 3, etag: "", lastModified: ""))
        XCTAssertGreaterThan(third.inode, second.inode, "numbers are never reused")
        XCTAssertNil(catalog.item(inode: first.inode))
        XCTAssertEqual(catalog.item(inode: third.inode)?.metadata.size, 3)
        XCTAssertEqual(catalog.totals.files, 2)
    }
}
