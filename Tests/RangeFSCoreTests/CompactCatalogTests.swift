@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// Issue 46: the catalog keeps listed files compact (FileTable.swift), deriving each one's URL from its directory's
/// and its Last-Modified from its listed date; every item must read back exactly as it was stored.
final class CompactCatalogTests: XCTestCase {
    let base = "http://127.0.0.1:8080/data/"

    /// Adds listed file `name` of `directory` as a JSON listing's parse makes it; returns it.
    @discardableResult
    func addListed(_ catalog: Catalog, _ name: String, in directory: UInt64, size: UInt64 = 7,
                   time: Int64 = 1_795_000_000, etag: String = "") -> CatalogItem {
        let url = base + DirectoryListing.encodeSegment(name)
        let metadata = RemoteMetadata(url: url, size: size, etag: etag, lastModified: HTTPDate.format(time))
        return catalog.add(metadata, explicitName: name, parent: directory, listed: true, validated: false,
                           attributesExact: true, listedTime: time, listedPrecision: .second)
    }

    func testListedFilesReadBackExactlyAndAreFoundByURLNameAndOrder() throws {
        let catalog = Catalog()
        let directory = catalog.addDirectory(url: base, explicitName: "data").inode
        // Names that need percent-encoding, unicode in both normal forms (two names: bytes differ), and plain ones.
        let names = ["b.bin", "a b?#%.bin", "caf\u{E9}.txt", "cafe\u{301}.txt", "\u{1F600} smile", "A;=@:x", "z"]
        // An array, not a dictionary keyed by String: that would take the two spellings of `café` for one key.
        let added = names.enumerated().map { index, name in
            addListed(catalog, name, in: directory, size: UInt64(index), time: 1_795_000_000 + Int64(index))
        }
        XCTAssertEqual(catalog.childCount(of: directory), names.count, "NFC and NFD are two names")
        for (name, stored) in zip(names, added) {
            XCTAssertTrue(stored.name.utf8.elementsEqual(name.utf8))
            let read = try XCTUnwrap(catalog.item(inode: stored.inode))
            XCTAssertEqual(read, stored, name)
            XCTAssertTrue(read.metadata.url.utf8.elementsEqual((base + DirectoryListing.encodeSegment(name)).utf8))
            XCTAssertEqual(read.metadata.lastModified, stored.metadata.lastModified)
            XCTAssertEqual(read.listedTime, stored.listedTime)
            XCTAssertEqual(read.listedPrecision, .second)
            XCTAssertEqual(catalog.node(named: name, in: directory)?.inode, stored.inode)
            XCTAssertEqual(catalog.items(url: stored.metadata.url).map(\.inode), [stored.inode], name)
            XCTAssertEqual(catalog.item(url: stored.metadata.url)?.inode, stored.inode, name)
            XCTAssertFalse(catalog.keepsURL(of: stored.inode), "\(name): its URL is derived, not kept")
        }
        XCTAssertNil(catalog.item(url: base + "caf%C3%A9.txt%20"), "no file of a URL never listed")
        XCTAssertNil(catalog.item(url: base + "b.bin/"))
        let order = names.map { FileName($0) }.sorted().map(\.string)
        XCTAssertEqual(catalog.children(of: directory).map(\.name), order, "byte order")
    }

    /// A listing's new files are added together (Catalog.addListed), most without their URL and date built as
    /// text: each reads back as `add` makes it, whatever its name (one renamed to stay unique keeps its URL whole),
    /// its date and ETag, and whether the listing's URL is the one the directory is known by.
    func testFilesAddedTogetherReadBackAsFilesAddedOneByOne() throws {
        for listingURL in [base, "http://user:secret@127.0.0.1:8080/data/"] {
            let oneByOne = Catalog(), together = Catalog()
            let first = oneByOne.addDirectory(url: base, explicitName: "data").inode
            let second = together.addDirectory(url: base, explicitName: "data").inode
            XCTAssertEqual(first, second)
            addListed(oneByOne, "taken", in: first)
            addListed(together, "taken", in: second)
            let directory = try XCTUnwrap(DirectoryURL(listingURL))
            var entries: [ListedEntry] = []
            for (index, name) in ["a b?#%.bin", "caf\u{E9}.txt", "taken", "no-date", "x"].enumerated() {
                let url = directory.child(encodedSegment: DirectoryListing.encodeSegment(name), isDirectory: false)
                var entry = ListedEntry(name: name, url: url, isDirectory: false, size: UInt64(index) << 40,
                                        modificationTime: name == "no-date" ? nil : 1_795_000_000 + Int64(index),
                                        datePrecision: index % 2 == 0 ? .second : .minute)
                entry.etag = index == 1 ? "\"0123456789abcdef0123456789abcdef\"" : index == 4 ? "W/\"w\"" : nil
                entries.append(entry)
                let stated = entry.size != nil && entry.modificationTime != nil
                oneByOne.add(RemoteMetadata(url: url, size: entry.size ?? 0, etag: entry.etag ?? "",
                                            lastModified: entry.modificationTime.map(HTTPDate.format) ?? ""),
                             explicitName: name, parent: first, listed: true, validated: false, attributesExact: stated,
                             listedTime: entry.modificationTime, listedPrecision: entry.datePrecision)
            }
            together.addListed(entries, parent: second, listingURL: listingURL)
            let expected = oneByOne.children(of: first), read = together.children(of: second)
            XCTAssertEqual(read, expected, listingURL)
            XCTAssertEqual(read.map(\.name), ["a b?#%.bin", "caf\u{E9}.txt", "no-date", "taken", "taken (2)", "x"])
            XCTAssertEqual(together.totals.bytes, oneByOne.totals.bytes)
            for case .file(let item) in read {
                XCTAssertTrue(together.items(url: item.metadata.url).contains(item), item.name)
            }
        }
    }

    func testRefreshAddsRemovesAndUpdatesWithInodesKept() throws {
        let catalog = Catalog()
        let directory = catalog.addDirectory(url: base, explicitName: "data").inode
        let a = addListed(catalog, "a", in: directory)
        let b = addListed(catalog, "b", in: directory)
        let c = addListed(catalog, "c", in: directory)
        catalog.removeNode(b.inode)
        let d = addListed(catalog, "d", in: directory)
        catalog.updateListed(inode: c.inode, metadata: RemoteMetadata(url: c.metadata.url, size: 99, etag: "",
                             lastModified: HTTPDate.format(1_800_000_000)), listedTime: 1_800_000_000, listedPrecision: .second)
        XCTAssertEqual(catalog.children(of: directory).map(\.inode), [a.inode, c.inode, d.inode])
        XCTAssertNil(catalog.item(url: b.metadata.url))
        XCTAssertEqual(catalog.item(inode: c.inode)?.metadata.size, 99)
        XCTAssertEqual(catalog.item(inode: c.inode)?.listedTime, 1_800_000_000)
        XCTAssertEqual(catalog.totals.files, 3)
        XCTAssertEqual(catalog.totals.bytes, 7 + 99 + 7)
    }

    func testWhatCannotBeDerivedIsKeptWhole() throws {
        let catalog = Catalog()
        let directory = catalog.addDirectory(url: base, explicitName: "data").inode
        // A probe's answer: its own Last-Modified (not the listed one), ETag, date of answer and mirrors.
        let listed = addListed(catalog, "f.bin", in: directory)
        var probed = RemoteMetadata(url: listed.metadata.url, size: 12, etag: "\"abc\"",
                                    lastModified: "Mon, 23 Nov 2026 10:00:00 GMT")
        probed.answeredAt = 1_795_100_000
        catalog.update(inode: listed.inode, metadata: probed)
        let read = try XCTUnwrap(catalog.item(inode: listed.inode))
        XCTAssertEqual(read.metadata, probed)
        XCTAssertEqual(read.metadata.answeredAt, 1_795_100_000)
        XCTAssertTrue(read.validated)
        XCTAssertEqual(read.listedTime, listed.listedTime, "the listing's date is kept")
        XCTAssertEqual(catalog.item(url: probed.url)?.inode, listed.inode, "found by URL once it is kept whole")
        XCTAssertTrue(catalog.keepsURL(of: listed.inode))
        // A second link to the same name: a unique name whose URL is not the directory's plus the name.
        let twin = catalog.add(RemoteMetadata(url: listed.metadata.url, size: 1, etag: "", lastModified: ""),
                               explicitName: "f.bin", parent: directory, listed: true, validated: false)
        XCTAssertNotEqual(twin.name, "f.bin")
        XCTAssertEqual(catalog.item(inode: twin.inode), twin)
        XCTAssertEqual(catalog.items(url: probed.url).map(\.inode), [listed.inode, twin.inode], "first added first")
        // A file mounted one by one in the root (no directory URL) and one with a suggested name.
        var named = RemoteMetadata(url: "http://h/x?y=1", size: 3, etag: "", lastModified: "")
        named.suggestedName = "report.pdf"
        let single = catalog.add(named)
        XCTAssertEqual(catalog.item(inode: single.inode)?.metadata.suggestedName, "report.pdf")
        XCTAssertEqual(catalog.item(url: "http://h/x?y=1")?.inode, single.inode)
    }
}
