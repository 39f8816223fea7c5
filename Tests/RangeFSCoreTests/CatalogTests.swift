@testable import RangeFSCache
@testable import RangeFSCatalog
import XCTest

/// The catalog without a mount: names, inodes, folders, sorted children and the lookups that must stay O(log n).
final class CatalogTests: XCTestCase {
    func metadata(_ url: String, size: UInt64 = 10, lastModified: String = "") -> RemoteMetadata {
        RemoteMetadata(url: url, size: size, etag: "\"e\"", lastModified: lastModified)
    }

    func testInodesGrowFromTwoAndNamesStayUniqueInTheirDirectory() {
        let catalog = Catalog()
        let first = catalog.add(metadata("http://h/a.bin"))
        let second = catalog.add(metadata("http://h/other/a.bin"))
        let third = catalog.add(metadata("http://h/b.bin"), explicitName: "a.bin")
        XCTAssertEqual([first.inode, second.inode, third.inode], [2, 3, 4])
        XCTAssertEqual(first.name, "a.bin")
        XCTAssertEqual(Set([first.name, second.name, third.name]).count, 3, "no two files share a name")
        XCTAssertTrue(second.name.hasPrefix("a (") && second.name.hasSuffix(").bin"), second.name)
        XCTAssertEqual(catalog.item(named: first.name)?.inode, first.inode)
        XCTAssertEqual(catalog.childCount(of: Catalog.rootInode), 3)
    }

    func testFoldersFromAListFileAreMadeOnceAndResolveByPath() {
        let catalog = Catalog()
        let movies = catalog.folder(["movies", "2026"])
        XCTAssertEqual(catalog.folder(["movies", "2026"]), movies, "the same path, the same folder")
        let film = catalog.add(metadata("http://h/f.mp4"), explicitName: "f.mp4", parent: movies)
        XCTAssertEqual(catalog.path(of: film.inode), "movies/2026/f.mp4")
        XCTAssertEqual(catalog.item(named: "movies/2026/f.mp4")?.inode, film.inode)
        XCTAssertEqual(catalog.depth(of: film.inode), 3)
        XCTAssertEqual(catalog.depth(of: movies), 2)
        XCTAssertNil(catalog.item(named: "movies/2026"), "a folder is not a file")
        XCTAssertEqual(catalog.remove(named: "movies/2026/f.mp4")?.inode, film.inode)
        XCTAssertNil(catalog.item(inode: film.inode))
    }

    func testChildrenComeInNameOrderAndAPageOfThemWithoutCopyingTheRest() {
        let catalog = Catalog()
        for name in ["c", "a", "e", "b", "d"] { catalog.add(metadata("http://h/\(name)"), explicitName: name) }
        XCTAssertEqual(catalog.children(of: Catalog.rootInode).map(\.name), ["a", "b", "c", "d", "e"])
        let page = catalog.children(of: Catalog.rootInode, from: 1, count: 2)
        XCTAssertEqual(page.nodes.map(\.name), ["b", "c"])
        XCTAssertEqual(page.total, 5)
        XCTAssertTrue(catalog.children(of: Catalog.rootInode, from: 9, count: 2).nodes.isEmpty)
        // A name added later takes its place in the order.
        catalog.add(metadata("http://h/bb"), explicitName: "bb")
        XCTAssertEqual(catalog.childInodes(of: Catalog.rootInode).compactMap { catalog.node(inode: $0)?.name },
                       ["a", "b", "bb", "c", "d", "e"])
    }

    /// Issue 35: names are bytes. `é.txt` spelled NFC (C3 A9) and NFD (65 CC 81) are two names of one directory,
    /// neither numbered, each found by its own bytes (a lookup, a path, the binary searches of the sorted
    /// children), sorted by bytes; the same bytes again is a duplicate and is numbered.
    func testNamesAreBytesNotCanonicallyEquivalentText() {
        let nfc = "\u{E9}.txt", nfd = "e\u{301}.txt"
        XCTAssertEqual(nfc, nfd, "Swift's String == holds them equal: the catalog must not")
        func bytes(_ name: String?) -> [UInt8] { Array((name ?? "").utf8) }
        let catalog = Catalog()
        let folder = catalog.addDirectory(url: "http://h/d/")
        let composed = catalog.add(metadata("http://h/d/%C3%A9.txt"), explicitName: nfc, parent: folder.inode,
                                   listed: true)
        let decomposed = catalog.add(metadata("http://h/d/e%CC%81.txt"), explicitName: nfd, parent: folder.inode,
                                     listed: true)
        XCTAssertEqual(bytes(composed.name), bytes(nfc))
        XCTAssertEqual(bytes(decomposed.name), bytes(nfd), "its own bytes, not a numbered name")
        XCTAssertEqual(catalog.node(named: nfc, in: folder.inode)?.inode, composed.inode)
        XCTAssertEqual(catalog.node(named: nfd, in: folder.inode)?.inode, decomposed.inode)
        XCTAssertEqual(catalog.item(named: "d/" + nfc)?.metadata.url, "http://h/d/%C3%A9.txt")
        XCTAssertEqual(catalog.item(named: "d/" + nfd)?.metadata.url, "http://h/d/e%CC%81.txt")
        let again = catalog.add(metadata("http://h/other.txt"), explicitName: nfc, parent: folder.inode)
        XCTAssertEqual(bytes(again.name), bytes("\u{E9} (2).txt"), "the same bytes twice: a duplicate")
        // Byte order: 65 (e) < C3 A9 20 (é, space) < C3 A9 2E (é, dot).
        XCTAssertEqual(catalog.childInodes(of: folder.inode), [decomposed.inode, again.inode, composed.inode])
        XCTAssertEqual(catalog.siblings(after: decomposed, limit: 5, scan: 5) { _ in true }.map(\.inode),
                       [again.inode, composed.inode])
        catalog.removeNode(composed.inode)
        XCTAssertNil(catalog.node(named: nfc, in: folder.inode), "the NFC name is gone")
        XCTAssertEqual(catalog.node(named: nfd, in: folder.inode)?.inode, decomposed.inode, "the NFD one stays")
        XCTAssertEqual(catalog.childInodes(of: folder.inode), [decomposed.inode, again.inode])
    }

    func testSiblingsAfterAFileAreFoundByBinarySearchAndFiltered() {
        let catalog = Catalog()
        let folder = catalog.addDirectory(url: "http://h/d/")
        let items = (0..<1000).map { index in
            catalog.add(metadata("http://h/d/f\(index)"), explicitName: String(format: "f%04d", index),
                        parent: folder.inode, listed: true, validated: index % 2 == 0)
        }
        let after = catalog.siblings(after: items[500], limit: 5, scan: 20) { !$0.validated }
        XCTAssertEqual(after.map(\.name), ["f0501", "f0503", "f0505", "f0507", "f0509"])
        XCTAssertEqual(catalog.siblings(after: items[998], limit: 5, scan: 20) { _ in true }.map(\.name), ["f0999"])
        XCTAssertTrue(catalog.siblings(after: items[500], limit: 5, scan: 1) { $0.validated }.isEmpty,
                      "no look past `scan` names")
    }

    /// `follows`, which DirectoryPrefetch asks at every open, says what `siblings` would, without making items: a
    /// file is within `count` names after another (a folder's name counts as one), never before it, never itself,
    /// never in another directory.
    func testFollowsSaysWhatSiblingsWould() {
        let catalog = Catalog()
        let folder = catalog.addDirectory(url: "http://h/d/")
        let items = (0..<20).map { index in
            catalog.add(metadata("http://h/d/f\(index)"), explicitName: String(format: "f%02d", index),
                        parent: folder.inode, listed: true)
        }
        catalog.addDirectory(url: "http://h/d/f05x/", parent: folder.inode, fromListing: true)
        let other = catalog.addDirectory(url: "http://h/e/")
        let stranger = catalog.add(metadata("http://h/e/f03"), explicitName: "f03", parent: other.inode, listed: true)
        for earlier in items + [stranger] {
            for later in items + [stranger] {
                for count in [1, 2, 8] {
                    let siblings = catalog.siblings(after: earlier, limit: count, scan: count) { _ in true }
                    XCTAssertEqual(catalog.follows(later, earlier, within: count),
                                   siblings.contains { $0.inode == later.inode },
                                   "\(later.name) within \(count) after \(earlier.name)")
                }
            }
        }
        XCTAssertTrue(catalog.follows(items[1], items[0], within: 1))
        XCTAssertFalse(catalog.follows(items[6], items[5], within: 1), "the folder f05x is the name after f05")
        XCTAssertTrue(catalog.follows(items[6], items[5], within: 2))
        XCTAssertTrue(catalog.follows(items[9], items[2], within: 8))
        XCTAssertFalse(catalog.follows(items[10], items[2], within: 8), "nine names after f02")
        XCTAssertFalse(catalog.follows(items[0], items[1], within: 8), "before is not after")
        XCTAssertFalse(catalog.follows(items[1], items[1], within: 8), "nor is the file itself")
        XCTAssertFalse(catalog.follows(stranger, items[2], within: 8), "nor another directory's f03")
    }

    func testRemovingADirectoryTakesEverythingUnderIt() {
        let catalog = Catalog()
        let top = catalog.addDirectory(url: "http://h/top/")
        let sub = catalog.addDirectory(url: "http://h/top/sub/", parent: top.inode, fromListing: true)
        let inner = catalog.add(metadata("http://h/top/sub/x"), parent: sub.inode, listed: true)
        let kept = catalog.add(metadata("http://h/y"))
        catalog.removeNode(top.inode)
        XCTAssertNil(catalog.directory(inode: top.inode))
        XCTAssertNil(catalog.directory(inode: sub.inode))
        XCTAssertNil(catalog.item(inode: inner.inode))
        XCTAssertNil(catalog.item(url: "http://h/top/sub/x"))
        XCTAssertEqual(catalog.children(of: Catalog.rootInode).map(\.inode), [kept.inode])
    }

    func testRemovingManySiblingsOneByOneKeepsTheOrder() {
        let catalog = Catalog()
        let items = (0..<200).map { catalog.add(metadata("http://h/\($0)"), explicitName: String(format: "n%03d", $0)) }
        _ = catalog.childInodes(of: Catalog.rootInode)  // sorted once
        for item in items where item.inode % 3 == 0 { catalog.removeNode(item.inode) }
        let left = catalog.children(of: Catalog.rootInode).map(\.name)
        XCTAssertEqual(left, items.filter { $0.inode % 3 != 0 }.map(\.name))
        XCTAssertEqual(left, left.sorted())
    }

    func testTheDateShownStaysTheListingsWhileAProbeFindsTheSameMinute() {
        let catalog = Catalog()
        let listed = catalog.add(metadata("http://h/f", lastModified: "Tue, 24 Nov 2026 10:00:00 GMT"), listed: true,
                                 validated: false, listedTime: 1_795_514_400)
        XCTAssertEqual(listed.shownModificationTime, 1_795_514_400)
        catalog.update(inode: listed.inode, metadata: metadata("http://h/f", lastModified: "Tue, 24 Nov 2026 10:00:42 GMT"))
        XCTAssertEqual(catalog.item(inode: listed.inode)?.shownModificationTime, 1_795_514_400,
                       "the probe's seconds do not move the date: a second rsync copies nothing")
        catalog.update(inode: listed.inode, metadata: metadata("http://h/f", lastModified: "Tue, 24 Nov 2026 11:30:00 GMT"))
        XCTAssertEqual(catalog.item(inode: listed.inode)?.shownModificationTime, 1_795_519_800,
                       "a file changed since its listing shows its new date")
    }

    func testUnlistedDirectoriesAndDirectorySources() {
        let catalog = Catalog()
        let source = catalog.addDirectory(url: "http://h/pub/")
        let found = catalog.addDirectory(url: "http://h/pub/sub/", parent: source.inode, fromListing: true)
        XCTAssertEqual(catalog.unlistedDirectories.map(\.inode), [source.inode, found.inode])
        XCTAssertEqual(catalog.directorySources.map(\.inode), [source.inode], "only what the mount was given")
        catalog.markListed(source.inode, at: 1)
        XCTAssertEqual(catalog.unlistedDirectories.map(\.inode), [found.inode])
        catalog.setRootURL("http://h/root/")
        XCTAssertEqual(catalog.directorySources.first?.inode, Catalog.rootInode)
        catalog.setRootURL(nil)
        XCTAssertEqual(catalog.directorySources.map(\.inode), [source.inode], "a root that failed is a plain folder")
    }
}
