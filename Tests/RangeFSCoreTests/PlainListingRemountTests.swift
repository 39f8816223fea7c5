import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest
@testable import RangeFSObjectStore

/// Issue 46, acceptance 4: an object store's flat prefix, kept for an offline remount, is added whole
/// (PlainListing.swift). A remount shows what the last listing read held, a changed listing included, and a file
/// of it is read from the cache with the server down. No FUSE: a `RangeFS` over a `MemoryOrigin`, remounted on
/// the same cache.
final class PlainListingRemountTests: XCTestCase {
    let origin = MemoryOrigin()
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "plain-remount")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// Serves bucket `bkt`'s prefix `d/` as one ListObjectsV2 page of `objects` (key, size, ETag) and their bytes.
    func serve(_ objects: [(key: String, size: Int, etag: String)]) {
        let contents = objects.map { object in
            "<Contents><Key>d/\(object.key)</Key><LastModified>2026-11-26T04:08:04Z</LastModified>"
                + "<ETag>&quot;\(object.etag)&quot;</ETag><Size>\(object.size)</Size></Contents>"
        }.joined()
        let page = "<ListBucketResult><IsTruncated>false</IsTruncated>\(contents)</ListBucketResult>"
        origin.serve(ObjectStoreURL.listURL(bucketURL: "http://h:9000/bkt", prefix: "d/", continuation: nil),
                     bytes: Array(page.utf8))
        for object in objects {
            origin.serve("http://h:9000/bkt/d/" + object.key, bytes: Array(repeating: 7, count: object.size),
                         etag: "\"\(object.etag)\"")
        }
    }

    /// The credentials of an anonymous, path-style store at `http://h:9000`, and the URL of `s3://bkt/d/` on it.
    func bucket() -> (CredentialTable, String) {
        let credentials = CredentialTable()
        credentials.setObjectStore(endpoint: "http://h:9000", region: "us-east-1", pathStyle: true, key: nil,
                                   anonymous: true)
        return (credentials, credentials.adopt("s3://bkt/d/").url)
    }

    /// The names and sizes the root of a mount of `s3://bkt/d/` on this test's cache shows, and the bytes of `read`.
    /// With `refreshing`, the kept listing shown first is listed again at once, behind, and that is waited for.
    func remount(reading read: String? = nil, refreshing: Bool = false) throws
        -> (shown: [String: UInt64], bytes: [UInt8]?) {
        let (credentials, root) = bucket()
        // The last mount's store lets go of the cache's lock when it is freed, and work it started (a listing read
        // behind, a probe) may hold it a moment after its `close`: the lock is waited for, not assumed free.
        let deadline = Date().addingTimeInterval(60)
        var made: RangeFS?
        while made == nil {
            do {
                made = try makeTestFileSystem(origin: origin, urls: [], directory: directory.path, root: root,
                                              credentials: credentials) { settings in
                    if refreshing { settings.directoryCacheTime = .seconds(0) }
                }
            } catch CacheError.locked where Date() < deadline {
                usleep(20_000)
            }
        }
        let fileSystem = try XCTUnwrap(made)
        defer { fileSystem.store.close() }
        if refreshing {
            _ = try fileSystem.directoryContents(Catalog.rootInode).get()
            let deadline = Date().addingTimeInterval(60)
            while fileSystem.directories.state.withLock({ $0.listings[Catalog.rootInode]?.running == true }),
                  Date() < deadline {
                usleep(10_000)
            }
        }
        var shown: [String: UInt64] = [:]
        for case .file(let item) in try fileSystem.directoryContents(Catalog.rootInode).get() {
            shown[item.name] = item.metadata.size
        }
        guard let read else { return (shown, nil) }
        let inode = try fileSystem.lookup(parent: Catalog.rootInode, name: read).get().inode
        let handle = try fileSystem.open(inode).get().handle
        defer { fileSystem.release(handle) }
        let size = Int(shown[read] ?? 0)
        return (shown, try fileSystem.readSynchronously(handle: handle, offset: 0, count: size)?.get())
    }

    func testARemountShowsTheLastListingReadAndReadsFromTheCacheOffline() throws {
        let etags = ["0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "abc-2"]
        serve([("a.bin", 10, etags[0]), ("b.bin", 20, etags[1])])
        XCTAssertEqual(try remount(reading: "a.bin").shown, ["a.bin": 10, "b.bin": 20])

        // The listing changes: a.bin grows, b.bin goes, c.bin comes. The next mount shows the kept listing, lists
        // the bucket again behind it, and keeps the new listing.
        origin.remove("http://h:9000/bkt/d/b.bin")
        serve([("a.bin", 30, etags[1]), ("c.bin", 5, etags[2])])
        let online = try remount(reading: "a.bin", refreshing: true)
        XCTAssertEqual(online.shown, ["a.bin": 30, "c.bin": 5])
        XCTAssertEqual(online.bytes, Array(repeating: 7, count: 30))
        let kept = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/listings/"
                                               + String(SHA256.hexDigest(bucket().1).prefix(32))))
        XCTAssertNotNil(PlainListing(records: Array(kept)), "the kept listing is one a remount adds whole")

        origin.isDown = true
        let requests = origin.requests.count
        let offline = try remount(reading: "a.bin")
        XCTAssertEqual(offline.shown, ["a.bin": 30, "c.bin": 5], "the listing read last, not the first")
        XCTAssertEqual(offline.bytes, Array(repeating: 7, count: 30), "read from the cache")
        XCTAssertEqual(origin.requests.count, requests, "nothing asked of a server that is down")
    }

    // A kept listing cut short (a disk that filled, a crash mid-copy) with the store down: the directory fails to
    // list with one line naming why, not an empty directory as if the store had emptied it (main showed it empty,
    // "showing the listing kept from an earlier visit"). Once the store answers, it lists again.
    func testACutKeptListingIsRefusedWithWhyAndTheDirectoryListsOnceTheStoreAnswers() throws {
        serve([("a.bin", 10, "0123456789abcdef0123456789abcdef"), ("b.bin", 20, "abc-2")])
        XCTAssertEqual(try remount().shown, ["a.bin": 10, "b.bin": 20])
        let path = directory.path + "/listings/" + String(SHA256.hexDigest(bucket().1).prefix(32))
        let kept = try Data(contentsOf: URL(fileURLWithPath: path))
        try kept.prefix(kept.count - 3).write(to: URL(fileURLWithPath: path))

        origin.isDown = true
        XCTAssertThrowsError(try remount()) { error in
            guard case FileSystemError.io(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("the listing kept from an earlier visit is not shown"), why)
            XCTAssertTrue(why.contains("cut or damaged"), why)
            XCTAssertFalse(why.contains("\n"), "one line: \(why)")
        }
        origin.isDown = false
        // The failed mount's retries let go of the cache's lock once they end.
        let deadline = Date().addingTimeInterval(60)
        var shown: [String: UInt64]?
        while shown == nil {
            do {
                shown = try remount().shown
            } catch CacheError.locked where Date() < deadline {
                usleep(100_000)
            }
        }
        XCTAssertEqual(shown, ["a.bin": 10, "b.bin": 20])
    }
}
