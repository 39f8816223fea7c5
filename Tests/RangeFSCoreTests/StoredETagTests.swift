@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// Issue 46: an object store's listed ETag (an MD5 in quotes, 34 bytes of text) costs a listed file no heap string
/// (FileTable.swift, `StoredETag`); every ETag reads back exactly as listed.
final class StoredETagTests: XCTestCase {
    let base = "http://127.0.0.1:9000/bkt/data/"

    func add(_ catalog: Catalog, _ name: String, etag: String, in directory: UInt64) -> CatalogItem {
        let metadata = RemoteMetadata(url: base + name, size: 1, etag: etag,
                                      lastModified: HTTPDate.format(1_795_000_000))
        return catalog.add(metadata, explicitName: name, parent: directory, listed: true, validated: false,
                           attributesExact: true, listedTime: 1_795_000_000, listedPrecision: .second)
    }

    func testEveryETagReadsBackAsListed() throws {
        let catalog = Catalog()
        let directory = catalog.addDirectory(url: base, explicitName: "data").inode
        let etags = ["\"0123456789abcdef0123456789abcdef\"", "\"ffffffffffffffffffffffffffffffff\"",
                     "\"00000000000000000000000000000000\"", "\"0123456789ABCDEF0123456789ABCDEF\"",
                     "W/\"0123456789abcdef0123456789abcd\"", "\"0123456789abcdef0123456789abcdef-12\"",
                     "\"0123456789abcdef0123456789abcdeg\"", "0123456789abcdef0123456789abcdef00", "", "\"\"", "x"]
        for (index, etag) in etags.enumerated() {
            let stored = add(catalog, "f\(index)", etag: etag, in: directory)
            XCTAssertEqual(try XCTUnwrap(catalog.item(inode: stored.inode)).metadata.etag, etag)
        }
        // Kept as its 16 bytes, no string: what the daemon's RSS per object listed shows (bench/listscale.py).
        XCTAssertEqual(StoredETag("\"0123456789abcdef0123456789abcdef\""),
                       .md5(0x0123_4567_89ab_cdef, 0x0123_4567_89ab_cdef))
        XCTAssertEqual(StoredETag("\"0123456789ABCDEF0123456789ABCDEF\""),
                       .text("\"0123456789ABCDEF0123456789ABCDEF\""), "upper case is kept as written")
        XCTAssertLessThanOrEqual(MemoryLayout<StoredFile>.stride, 72, "a listed file's record stays 72 bytes")
    }
}
