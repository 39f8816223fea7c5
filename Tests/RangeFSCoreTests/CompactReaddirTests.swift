import Dispatch
import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46: READDIRPLUS of listed files answered from the catalog's compact fields (no URL, date or ETag made as
/// text per file) while the cache holds no entry at all, and from each file's entry as before once it holds one:
/// either way the attributes are exactly those a lookup gives.
final class CompactReaddirTests: XCTestCase {
    let origin = MemoryOrigin()
    let url = "http://origin/listed/"
    let sizes = ["a.bin": 3000, "b c.bin": 2000, "d%e.bin": 1000]

    override func setUp() {
        super.setUp()
        var objects: [String] = []
        for (index, (name, size)) in sizes.sorted(by: { $0.key < $1.key }).enumerated() {
            objects.append(#"{"name":"\#(name)","type":"file","mtime":"\#(origin.lastModified)","size":\#(size)}"#)
            origin.serve(url + DirectoryListing.encodeSegment(name), bytes: pseudoRandomBytes(count: size, seed: UInt64(index)))
        }
        origin.serve(url, bytes: Array(("[" + objects.joined(separator: ",") + "]").utf8))
    }

    /// READDIRPLUS of directory `inode` from position 0, waited for.
    func readDirectoryPlus(_ fileSystem: RangeFS, _ inode: UInt64 = Catalog.rootInode) throws -> [RangeFS.DirectoryEntry] {
        let handle = try fileSystem.openDirectory(inode).get()
        defer { fileSystem.releaseDirectory(handle) }
        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<Result<[RangeFS.DirectoryEntry], FileSystemError>?>(nil)
        fileSystem.readDirectory(inode, handle: handle, from: 0, count: 100, attributes: true) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "READDIRPLUS answered")
        return try XCTUnwrap(answer.withLock { $0 }).get()
    }

    /// The cached bytes READDIRPLUS shows of each name, after checking that every entry's attributes are what a
    /// lookup of the file gives (unless `checking` is off: while a file's cached bytes still change, the lookup
    /// that follows the READDIRPLUS may see them further on).
    func cachedBytesShown(_ fileSystem: RangeFS, checking: Bool = true) throws -> [String: UInt64] {
        let entries = try readDirectoryPlus(fileSystem)
        XCTAssertEqual(entries.map(\.name), sizes.keys.sorted())
        var shown: [String: UInt64] = [:]
        for entry in entries {
            let attributes = try XCTUnwrap(entry.attributes, "\(entry.name): exact in its listing")
            if checking { XCTAssertEqual(attributes, try fileSystem.attributes(of: entry.inode).get(), entry.name) }
            XCTAssertEqual(attributes.size, UInt64(sizes[entry.name]!))
            shown[entry.name] = attributes.cachedBytes
        }
        return shown
    }

    func testReaddirplusShowsWhatALookupShowsWithAndWithoutCacheEntries() throws {
        let cache = try TemporaryDirectory(prefix: "compact-readdir")
        let empty = ["a.bin": UInt64(0), "b c.bin": 0, "d%e.bin": 0]
        try withListedFolder(url, of: origin, cache: cache.path) { mounted, catalog in
            XCTAssertTrue(mounted.store.holdsNoEntries(), "a fresh cache")
            let inodes = catalog.childInodes(of: Catalog.rootInode)
            XCTAssertTrue(catalog.directoryChildren(inodes, compact: true).allSatisfy {
                if case .listed = $0 { true } else { false }
            }, "plain listed files come compact")
            XCTAssertEqual(try cachedBytesShown(mounted), empty)
            let item = try XCTUnwrap(catalog.item(named: "b c.bin"))
            let handle = try mounted.open(item.inode).get().handle
            XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 2000)?.get(),
                           pseudoRandomBytes(count: 2000, seed: 1))
            mounted.release(handle)
            XCTAssertFalse(mounted.store.holdsNoEntries(), "an entry was made")
            let deadline = Date().addingTimeInterval(30)
            while try cachedBytesShown(mounted, checking: false)["b c.bin"] != 2000 && Date() < deadline {
                usleep(10_000)
            }
            XCTAssertEqual(try cachedBytesShown(mounted), empty.merging(["b c.bin": 2000]) { $1 })
        }
        // Remounted: the entry is on disk only, found through the index of entries' names.
        try withListedFolder(url, of: origin, cache: cache.path) { mounted, _ in
            XCTAssertFalse(mounted.store.holdsNoEntries(), "the entry on disk")
            XCTAssertEqual(try cachedBytesShown(mounted), empty.merging(["b c.bin": 2000]) { $1 },
                           "the cached file shows its bytes after a remount")
        }
    }

    func testOnlyPlainListedFilesComeCompact() throws {
        let catalog = Catalog()
        let folder = catalog.addDirectory(url: url)
        var plain = ListedEntry(name: "plain.bin", in: url, isDirectory: false)
        plain.size = 10
        plain.modificationTime = 1_000_000
        plain.etag = #""0123456789abcdef0123456789abcdef""#
        var undated = ListedEntry(name: "undated.bin", in: url, isDirectory: false)
        undated.size = 20
        var validated = ListedEntry(name: "validated.bin", in: url, isDirectory: false)
        validated.size = 30
        catalog.addListed([plain, undated, validated], parent: folder.inode, listingURL: url)
        let byName = Dictionary(uniqueKeysWithValues: catalog.children(of: folder.inode).map { ($0.name, $0.inode) })
        let probed = RemoteMetadata(url: url + "validated.bin", size: 30, etag: "\"v\"", lastModified: "")
        catalog.update(inode: byName["validated.bin"]!, metadata: probed)
        let mounted = catalog.add(RemoteMetadata(url: "http://origin/one.bin", size: 5, etag: "", lastModified: ""),
                                  parent: folder.inode)
        let inodes = catalog.childInodes(of: folder.inode)
        let children = catalog.directoryChildren(inodes + [999_999], compact: true)
        XCTAssertEqual(children.count, inodes.count + 1)
        XCTAssertNil(children.last!, "an inode that is not in the tree")
        var compact: [String: ListedAttributes] = [:]
        for child in children.compactMap({ $0 }) {
            if case .listed(let inode, let listed) = child {
                XCTAssertEqual(catalog.item(inode: inode)?.name, listed.name)
                compact[listed.name] = listed
            }
        }
        XCTAssertEqual(compact["plain.bin"], ListedAttributes(name: "plain.bin", size: 10, listedTime: 1_000_000,
                                                              attributesExact: true))
        XCTAssertEqual(compact["undated.bin"], ListedAttributes(name: "undated.bin", size: 20, listedTime: nil,
                                                                attributesExact: false))
        XCTAssertEqual(Set(compact.keys), ["plain.bin", "undated.bin"], "a probed file and one mounted alone are not")
        XCTAssertEqual(catalog.directoryChildren([mounted.inode], compact: true), [.node(.file(mounted))])
        XCTAssertEqual(catalog.directoryChildren([byName["plain.bin"]!], compact: false),
                       [catalog.node(inode: byName["plain.bin"]!).map(DirectoryChild.node)],
                       "not compact: the whole node")
    }
}
