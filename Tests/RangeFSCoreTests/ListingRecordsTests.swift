@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// Issue 46: an object store's listing and the kept listing are binary records (ListingRecords.swift), read with no
/// text parsing. What they state reads back exactly; a cut or damaged file is no listing at all (never one that
/// lacks its last children), and the JSON an older rangefs kept still reads.
final class ListingRecordsTests: XCTestCase {
    private let base = "http://127.0.0.1:9000/bkt/photos/"

    private let records = [
        ListingRecords.Record(name: "2026", isDirectory: true),
        ListingRecords.Record(name: "a b+c%.jpg", size: 0, modificationTime: 1_764_000_000, etag: "\"9e107d9d372bb6826bd81d3542a419d6\""),
        ListingRecords.Record(name: "é-NFC.txt", size: 1 << 40, modificationTime: -86_400, datePrecision: .minute),
        ListingRecords.Record(name: "no-date", size: (1 << 63) - 1),
        ListingRecords.Record(name: "weak", etag: "W/\"x\""),
    ]

    func testRecordsReadBackAsWritten() {
        var read: [ListingRecords.Record] = []
        XCTAssertTrue(ListingRecords.forEach(ListingRecords.encode(records)) { read.append($0) })
        XCTAssertEqual(read, records)
    }

    func testRecordsParseAsTheJSONListingOfTheSameChildren() throws {
        let json = """
            [{"name":"2026","type":"directory"},\
            {"name":"a b+c%.jpg","size":0,"mtime":"\(HTTPDate.format(1_764_000_000))","etag":"\\"9e107d9d372bb6826bd81d3542a419d6\\""},\
            {"name":"no-date","size":\(1 << 52)},{"name":"weak","etag":"W/\\"x\\""}]
            """
        var fromRecords = records
        fromRecords.remove(at: 2)
        fromRecords[2].size = 1 << 52  // exact as a JSON number (a double)
        let body = ListingRecords.encode(fromRecords)
        let listing = DirectoryListing.parse(body, base: base)
        XCTAssertEqual(listing, DirectoryListing.parse(Array(json.utf8), base: base))
        XCTAssertEqual(listing.entries.map(\.url), [base + "2026/", base + "a%20b+c%25.jpg", base + "no-date", base + "weak"])
        XCTAssertNil(DirectoryListing.problem(with: body, parsed: listing))
        // A weak ETag is not kept, as a JSON listing's is not: only quoted strong ones are.
        XCTAssertNil(listing.entries[3].etag)
    }

    func testTheSameRulesApplyToRecordsAsToJSON() {
        let body = ListingRecords.encode([
            ListingRecords.Record(name: "a", isDirectory: true),
            ListingRecords.Record(name: "a", size: 1),  // a key that is also a prefix: the folder is shown
            ListingRecords.Record(name: "..", size: 1),
            ListingRecords.Record(name: "line\nbreak", size: 1),
            ListingRecords.Record(name: "b", size: 1),
            ListingRecords.Record(name: "c", size: 1),
        ])
        let listing = DirectoryListing.parse(body, base: base, limit: 2)
        XCTAssertEqual(listing.entries.map(\.name), ["a", "b"])
        XCTAssertTrue(listing.truncated)
        XCTAssertEqual(listing.controlNames, ["line\nbreak"])
        XCTAssertEqual(listing.skipped.map(\.link), ["a", ".."])
    }

    func testACutOrDamagedListingIsNoListing() {
        let body = ListingRecords.encode(records)
        var damaged: [[UInt8]] = []
        for index in stride(from: ListingRecords.magic.count, to: body.count, by: 3) {
            var flipped = body
            flipped[index] ^= 0x40
            damaged.append(flipped)
        }
        for length in [ListingRecords.magic.count, body.count / 2, body.count - 1] {
            damaged.append(Array(body.prefix(length)))
        }
        for bytes in damaged {
            var visited = 0
            XCTAssertFalse(ListingRecords.forEach(bytes) { _ in visited += 1 })
            XCTAssertEqual(visited, 0, "nothing of a damaged listing is handed on")
            let listing = DirectoryListing.parse(bytes, base: base)
            XCTAssertEqual(listing.entries, [])
            let problem = DirectoryListing.problem(with: bytes, parsed: listing)
            XCTAssertTrue(problem?.contains("cut or damaged") == true, problem ?? "no problem found")
        }
    }

    func testRecordsOfAnotherVersionAreNotReadAsThese() {
        var body = ListingRecords.encode(records)
        body[ListingRecords.magic.count - 1] = 2
        XCTAssertFalse(ListingRecords.forEach(body) { _ in })
        XCTAssertNotNil(DirectoryListing.problem(with: body, parsed: DirectoryListing.parse(body, base: base)))
    }

    func testAKeptListingOfRecordsIsKeptAsItCame() throws {
        // A `?` in a name is part of the name: the kept HTML listings' query redaction must leave records alone.
        let body = ListingRecords.encode([ListingRecords.Record(name: "what?x=1", size: 3)])
        XCTAssertEqual(ListingRedaction.kept(body), body)
    }
}
