import Foundation
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46, acceptance 4: a JSON listing (nginx, Caddy) is read straight to records (ListingJSON+Records.swift),
/// its JSON let go before the catalog grows, and a listing of plainly named files in name order is added whole.
/// Whatever is read to records reads back as the listing the JSON was (the same entries, the same skipped links,
/// the same truncation, no problem where the JSON had none), over the fuzzer's inputs and their changes; what the
/// catalog holds is what the JSON gave it before; and the records are what is kept, shown again offline.
final class ListingJSONRecordsTests: XCTestCase {
    private let base = "http://h/d/"

    /// An nginx listing of files only, in nginx's order (bytewise by name): read to records, then added whole.
    private static let nginxFiles = """
        [
        { "name":"100%.dat", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT", "size":2 },
        { "name":"a b&c.txt", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:01 GMT", "size":3 },
        { "name":"photo-000001.jpg", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT", "size":1 },
        { "name":"x-\\u00e9.txt", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT", "size":5000000000 }
        ]
        """

    /// The listings the differential test reads: the fuzzer's kept inputs, listings holding what the rules skip or
    /// change, and every cut and many one-byte changes of nginx's.
    private func listings() throws -> [(String, [UInt8])] {
        var listings: [(String, [UInt8])] = []
        for folder in ["seeds", "regressions"] {
            listings += try XCTUnwrap(FuzzInputs.kept(folder, of: "ListingJSON")).map { ("\(folder)/\($0.name)", $0.bytes) }
        }
        let nginx = Self.nginxFiles
        let variants: [(String, String)] = [
            ("nginx files", nginx),
            ("control name", nginx.replacingOccurrences(of: "a b&c", with: "a\\nb")),
            ("only a control name", #"[{"name":"a\tb","size":1}]"#),
            ("dot names", #"[{"name":".."},{"name":"."},{"name":"a/b"},{"name":"ok"}]"#),
            ("only dot names", #"[{"name":".."},{"name":"a/b","size":1}]"#),
            ("a name twice", #"[{"name":"x","type":"directory"},{"name":"x","size":1},{"name":"x","size":2}]"#),
            ("NUL in a name", #"[{"name":"a\u0000b"},{"name":"c"}]"#),
            ("long name", "[{\"name\":\"\(String(repeating: "n", count: 256))\"},{\"name\":\"short\"}]"),
            ("no name", #"[{"size":1},{"type":"file"},{"name":"z"}]"#),
            ("sizes", #"[{"name":"a","size":-1},{"name":"b","size":1.5},{"name":"c","size":9.3e18},{"name":"d","size":"7"},{"name":"e","size":1e3}]"#),
            ("dates", #"[{"name":"a","mtime":"x"},{"name":"b","mod_time":"2026-11-23T10:00:00.5Z"},{"name":"c","mtime":"Mon, 23 Nov 2026 10:00:00 GMT","mod_time":"2020-01-01T00:00:00Z"}]"#),
            ("etags", #"[{"name":"a","etag":"\"x\""},{"name":"b","etag":"W/\"y\""},{"name":"c","etag":5}]"#),
            ("caddy folder", #"[{"name":"sub","is_dir":true,"size":4096},{"name":"f","is_dir":false,"size":4096}]"#),
            ("nested value", #"[{"name":"a","extra":{"b":[1,2]},"size":1}]"#),
            ("empty", "[]"),
            ("empty object", "[{}]"),
            ("not an array", #"{"name":"a"}"#),
            ("DEL in text", "[{\"name\":\"a\",\"x\":\"\(String(repeating: "\u{7F}", count: 40))\"}]"),
            ("out of order", #"[{"name":"b","size":1},{"name":"a","size":1}]"#),
            ("unicode escapes", #"[{"name":"\ud83d\ude00","size":1},{"name":"e\u0301","size":2},{"name":"\u00e9","size":3}]"#),
        ]
        listings += variants.map { ($0.0, Array($0.1.utf8)) }
        let bytes = Array(nginx.utf8)
        for cut in stride(from: 0, to: bytes.count, by: 5) { listings.append(("cut at \(cut)", Array(bytes[..<cut]))) }
        listings += FuzzInputs.oneByteChanges(of: bytes, count: 600,
                                              replacements: Array("[]{}:,\"\\/ .-0e\u{0}\u{7F}\u{0A}".utf8))
        return listings
    }

    /// Whatever is read to records is, read back, the listing its JSON was; nginx's and Caddy's listings are read
    /// to records (else nothing is gained).
    func testWhatIsReadToRecordsIsTheListingTheJSONWas() throws {
        var read = 0
        for (name, json) in try listings() {
            guard let records = ListingJSON.records(json) else { continue }
            read += 1
            XCTAssertTrue(ListingRecords.isRecords(records), name)
            for limit in [DirectoryListing.maximumEntries, 2, 1] {
                let fromJSON = DirectoryListing.parse(json, base: base, limit: limit)
                let fromRecords = DirectoryListing.parse(records, base: base, limit: limit)
                XCTAssertEqual(fromRecords, fromJSON, "\(name), limit \(limit)")
                XCTAssertFalse(fromRecords.entries.isEmpty, "\(name): read to records, and shows a child")
                XCTAssertNil(DirectoryListing.problem(with: json, parsed: fromJSON), name)
                XCTAssertNil(DirectoryListing.problem(with: records, parsed: fromRecords), name)
            }
        }
        XCTAssertGreaterThan(read, 100, "most changed listings are still read to records")
        for seed in try XCTUnwrap(FuzzInputs.kept("seeds", of: "ListingJSON")) {
            XCTAssertNotNil(ListingJSON.records(seed.bytes), "\(seed.name): read to records")
        }
        // What the JSON would be judged on is left as JSON: no child shown, not text, not flat.
        for kept in ["[]", #"[{"name":".."}]"#, #"[{"name":"a","x":[1]}]"#, "[{\"name\":\"a\",\"x\":\"\u{7F}\u{7F}\u{7F}\"}]"] {
            XCTAssertNil(ListingJSON.records(Array(kept.utf8)), kept)
        }
    }

    /// nginx's listing of files is added whole from its records, and the catalog holds what the JSON gave it.
    func testNginxsFilesAreAddedWholeAsTheJSONAddedThem() throws {
        let json = Array(Self.nginxFiles.utf8)
        let records = try XCTUnwrap(ListingJSON.records(json))
        let listing = try XCTUnwrap(PlainListing(records: records), "a listing of files in name order")
        XCTAssertEqual(listing.count, 4)
        let whole = Catalog()
        XCTAssertTrue(whole.addPlainListing(listing, parent: whole.addDirectory(url: base).inode, listingURL: base))
        let ruled = Catalog()
        ruled.addListed(DirectoryListing.parse(json, base: base).entries, parent: ruled.addDirectory(url: base).inode,
                        listingURL: base)
        XCTAssertEqual(whole.items, ruled.items)
        XCTAssertEqual(whole.items.map(\.metadata.size), [2, 3, 1, 5_000_000_000])
        XCTAssertEqual(whole.items.first?.listedTime, 1_795_428_000)
        XCTAssertEqual(whole.items.first?.listedPrecision, .second)
        XCTAssertEqual(whole.childInodes(of: 2), ruled.childInodes(of: 2))
        XCTAssertEqual(whole.directoryChildren(whole.childInodes(of: 2), compact: true),
                       ruled.directoryChildren(ruled.childInodes(of: 2), compact: true))
    }

    /// Mounted: the listing shows as the JSON states it, is kept as records, and shows again from them with the
    /// server down, a file read from the cache. No FUSE: a `RangeFS` over a `MemoryOrigin`.
    func testAJSONListingIsKeptAsRecordsAndShownFromThemOffline() throws {
        let origin = MemoryOrigin()
        let directory = try TemporaryDirectory(prefix: "json-records")
        let json = """
            [{ "name":"sub", "type":"directory", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT" },
            { "name":"a.bin", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT", "size":10 },
            { "name":"b.bin", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT", "size":20 }]
            """
        origin.serve(base, bytes: Array(json.utf8))
        origin.serve(base + "a.bin", bytes: Array(repeating: 7, count: 10))
        origin.serve(base + "b.bin", bytes: Array(repeating: 8, count: 20))
        // Each mount's store goes before the next takes the cache's lock (`withFileSystem`).
        func mount(reading name: String) throws -> (shown: [String: UInt64], bytes: [UInt8]?) {
            var shown: [String: UInt64] = [:]
            var bytes: [UInt8]?
            let released = try withFileSystem({
                try makeTestFileSystem(origin: origin, urls: [], directory: directory.path, root: base)
            }) { fileSystem in
                for node in try fileSystem.directoryContents(Catalog.rootInode).get() {
                    switch node {
                    case .file(let item): shown[item.name] = item.metadata.size
                    case .directory(let folder): shown[folder.name + "/"] = 0
                    }
                }
                let inode = try fileSystem.lookup(parent: Catalog.rootInode, name: name).get().inode
                let handle = try fileSystem.open(inode).get().handle
                defer { fileSystem.release(handle) }
                bytes = try fileSystem.readSynchronously(handle: handle, offset: 0, count: 10)?.get()
            }
            XCTAssertTrue(released, "the mount's store was released")
            return (shown, bytes)
        }
        let online = try mount(reading: "a.bin")
        XCTAssertEqual(online.shown, ["sub/": 0, "a.bin": 10, "b.bin": 20])
        XCTAssertEqual(online.bytes, Array(repeating: 7, count: 10))
        let kept = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/listings/"
                                               + String(SHA256.hexDigest(base).prefix(32))))
        XCTAssertEqual(Array(kept), ListingJSON.records(Array(json.utf8)), "the listing kept as its records")

        origin.isDown = true
        let offline = try mount(reading: "a.bin")
        XCTAssertEqual(offline.shown, online.shown, "the kept records shown")
        XCTAssertEqual(offline.bytes, Array(repeating: 7, count: 10), "read from the cache")
    }
}
