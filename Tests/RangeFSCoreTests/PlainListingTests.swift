@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// Issue 46, acceptance 4: a million kept objects show offline in 5 s. A first listing of plainly named files in
/// name order is added whole (PlainListing.swift, CatalogState+PlainListing.swift): no parse into entries and no
/// table of names. What the catalog then holds and answers must be what the rules make of the same listing; any
/// listing a rule would change is not taken for one; and the directory changes afterwards as any other.
final class PlainListingTests: XCTestCase {
    private let base = "http://127.0.0.1:9000/bkt/photos/"

    private let records = [
        ListingRecords.Record(name: "a b+c%.jpg", size: 0, modificationTime: 1_764_000_000,
                              etag: "\"9e107d9d372bb6826bd81d3542a419d6\""),
        ListingRecords.Record(name: "multipart", size: 7, modificationTime: 1_764_000_001, etag: "\"abc-2\""),
        ListingRecords.Record(name: "no-date", size: (1 << 63) - 1),
        ListingRecords.Record(name: "photo-0000001.jpg", size: 1, modificationTime: 1_764_000_000,
                              datePrecision: .minute, etag: "\"0123456789abcdef0123456789abcdef\""),
        ListingRecords.Record(name: "weak", etag: "W/\"x\""),
        ListingRecords.Record(name: "x-é-NFC.txt", size: 1 << 40, modificationTime: -86_400),
    ]

    /// A catalog whose directory `base` (inode 2) holds `body`: added whole, or (`whole: false`) parsed and added
    /// by the rules, as a listing was before.
    private func catalog(of body: [UInt8], whole: Bool) throws -> Catalog {
        let catalog = Catalog()
        let directory = catalog.addDirectory(url: base)
        if whole {
            let listing = try XCTUnwrap(PlainListing(records: body))
            XCTAssertTrue(catalog.addPlainListing(listing, parent: directory.inode, listingURL: base))
        } else {
            let entries = DirectoryListing.parse(body, base: base).entries
            catalog.addListed(entries, parent: directory.inode, listingURL: base)
        }
        return catalog
    }

    func testAListingAddedWholeIsWhatTheRulesMakeOfIt() throws {
        let body = ListingRecords.encode(records)
        let whole = try catalog(of: body, whole: true)
        let ruled = try catalog(of: body, whole: false)
        XCTAssertEqual(whole.items, ruled.items)
        XCTAssertEqual(whole.items.count, records.count)
        XCTAssertEqual(whole.childInodes(of: 2), ruled.childInodes(of: 2))
        XCTAssertEqual(whole.childCount(of: 2), records.count)
        XCTAssertEqual(whole.totals.bytes, ruled.totals.bytes)
        XCTAssertEqual(whole.directoryChildren(whole.childInodes(of: 2), compact: true),
                       ruled.directoryChildren(ruled.childInodes(of: 2), compact: true))
        for record in records {
            let node = try XCTUnwrap(whole.node(named: record.name, in: 2), record.name)
            XCTAssertEqual(node, ruled.node(named: record.name, in: 2))
            guard case .file(let item) = node else { return XCTFail("\(record.name) is no file") }
            XCTAssertEqual(whole.item(url: item.metadata.url), item, "found by its URL")
            XCTAssertEqual(whole.item(named: "photos/" + record.name), item, "found by its path")
        }
        XCTAssertNil(whole.node(named: "photo-0000002.jpg", in: 2))
        XCTAssertNil(whole.node(named: "", in: 2))
        XCTAssertNil(whole.node(named: "zzz", in: 2))
        // The MD5 ETag kept as its bytes reads back as listed; a weak one is not kept, as the rules have it.
        XCTAssertEqual(whole.item(named: "photos/photo-0000001.jpg")?.metadata.etag, records[3].etag)
        XCTAssertEqual(whole.item(named: "photos/weak")?.metadata.etag, "")
    }

    func testAListingARuleWouldChangeIsReadByTheRules() {
        let file = ListingRecords.Record(name: "b", size: 1)
        let refused: [String: [ListingRecords.Record]] = [
            "a folder": [ListingRecords.Record(name: "a", isDirectory: true), file],
            "out of order": [file, ListingRecords.Record(name: "a", size: 1)],
            "the same name twice": [file, file],
            "a control character": [ListingRecords.Record(name: "line\nbreak", size: 1)],
            "a parent": [ListingRecords.Record(name: "..", size: 1)],
            "a leading space": [ListingRecords.Record(name: " a", size: 1)],
            "a trailing DEL": [ListingRecords.Record(name: "a\u{7F}", size: 1)],
            "a name too long": [ListingRecords.Record(name: String(repeating: "x", count: 256), size: 1)],
            // Not changed by the rules, but told from one they change only by Unicode's tables: left to them.
            "a name that starts with a letter outside ASCII": [ListingRecords.Record(name: "é", size: 1)],
        ]
        for (why, records) in refused {
            XCTAssertNil(PlainListing(records: ListingRecords.encode(records)), why)
        }
        let many = (0..<3).map { ListingRecords.Record(name: "f\($0)", size: 1) }
        XCTAssertNil(PlainListing(records: ListingRecords.encode(many), limit: 2), "more than the limit")
        XCTAssertEqual(PlainListing(records: ListingRecords.encode(many), limit: 3)?.count, 3)
        XCTAssertEqual(PlainListing(records: ListingRecords.encode([]))?.count, 0)
        // Bytes that are no UTF-8, sealed as a writer never would.
        var body = ListingRecords.magic + [0x02, 0x02, 0x61, 0xFF, 0x01]
        withUnsafeBytes(of: UInt32(1).littleEndian) { body.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.checksum(body[...]).littleEndian) { body.append(contentsOf: $0) }
        XCTAssertTrue(ListingRecords.forEach(body) { _ in }, "the records read")
        XCTAssertNil(PlainListing(records: body), "a name that is not UTF-8")
        // Cut or damaged: nothing.
        let good = ListingRecords.encode(records)
        XCTAssertNil(PlainListing(records: Array(good.dropLast())))
        var flipped = good
        flipped[ListingRecords.magic.count + 3] ^= 0x40
        XCTAssertNil(PlainListing(records: flipped))
        XCTAssertNil(PlainListing(records: Array(#"[{"name":"a","size":1}]"#.utf8)), "JSON")
    }

    func testADirectoryAddedWholeChangesAsAnyOther() throws {
        let body = ListingRecords.encode((0..<200).map { ListingRecords.Record(name: "f\(1000 + $0)", size: 1) })
        let catalog = try catalog(of: body, whole: true)
        let listing = try XCTUnwrap(PlainListing(records: body))
        XCTAssertFalse(catalog.addPlainListing(listing, parent: 2, listingURL: base), "a directory holding files")
        XCTAssertEqual(catalog.childCount(of: 2), 200)

        // A file added by name, one listed again under a taken name, one removed: the table of names is built.
        let added = catalog.add(RemoteMetadata(url: "http://other/f1100", size: 5, etag: "", lastModified: ""),
                                parent: 2)
        XCTAssertEqual(added.name, "f1100 (2)", "a taken name gets a number")
        let gone = try XCTUnwrap(catalog.node(named: "f1050", in: 2))
        catalog.removeNode(gone.inode)
        XCTAssertNil(catalog.node(named: "f1050", in: 2))
        catalog.addListed([ListedEntry(name: "a-new", url: base + "a-new", isDirectory: false, size: 3)], parent: 2,
                          listingURL: base)
        let names = catalog.children(of: 2).map(\.name)
        XCTAssertEqual(names.count, 201)
        XCTAssertEqual(names, names.sorted { FileName($0) < FileName($1) }, "still in name order")
        XCTAssertEqual(names.first, "a-new")
        for name in ["a-new", "f1000", "f1100 (2)", "f1199"] {
            XCTAssertEqual(catalog.node(named: name, in: 2)?.name, name)
        }
        XCTAssertEqual(catalog.node(named: "f1100 (2)", in: 2)?.inode, added.inode)
    }
}
