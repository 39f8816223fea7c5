import Foundation
import Glibc
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest
@testable import RangeFSObjectStore

/// An object store's listing states each object's ETag: one that is the cached version's counts as a check of it,
/// made when the listing was read from the store (DirectoryService+Probes.swift, `whenValidated`). Never made
/// later than that: a kept listing counts from when its mount read it, a refresh that failed moves nothing, and a
/// web server's listing never counts. No FUSE: a `RangeFS` over a `MemoryOrigin`, remounted on the same cache.
final class ListedValidationTests: XCTestCase {
    let origin = MemoryOrigin()
    var directory: TemporaryDirectory!
    let bytes = pseudoRandomBytes(count: 100_000, seed: 7)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "listed-validation")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// The table of a mount of bucket `bkt` on an anonymous, path-style endpoint at `http://h:9000`.
    func objectStore() -> CredentialTable {
        let table = CredentialTable()
        table.setObjectStore(endpoint: "http://h:9000", region: "us-east-1", pathStyle: true, key: nil, anonymous: true)
        return table
    }

    /// Serves `d/a.bin` (ETag "e1") and the ListObjectsV2 page that lists it.
    func serveBucket() {
        let page = #"""
        <ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>
        <Contents><Key>d%2Fa.bin</Key><LastModified>2026-11-26T04:08:04Z</LastModified><ETag>&quot;e1&quot;</ETag>
        <Size>100000</Size></Contents></ListBucketResult>
        """#
        origin.serve(ObjectStoreURL.listURL(bucketURL: "http://h:9000/bkt", prefix: "d/", continuation: nil),
                     bytes: Array(page.utf8))
        origin.serve("http://h:9000/bkt/d/a.bin", bytes: bytes, etag: "\"e1\"")
    }

    /// A mount of `root` on this test's cache; `body` runs with it, and the store is closed after.
    func mounted(_ root: String, credentials: CredentialTable, directoryCacheTime: Duration = .seconds(60),
                 _ body: (RangeFS) throws -> Void) throws {
        // The next mount of this cache waits for this one's store to go, as a new process would find it.
        let released = try withFileSystem({
            try makeTestFileSystem(origin: origin, urls: [], directory: directory.path, root: root,
                                   credentials: credentials, kernel: KernelRecorder()) { settings in
                settings.directoryCacheTime = directoryCacheTime
                settings.revalidateAfter = FileSystemSettings().revalidateAfter  // the default: its check is the point
            }
        }, body)
        XCTAssertTrue(released, "the mount's store was released")
    }

    /// Opens `name` in the root, reads it whole (checking its bytes), and closes it.
    func readWhole(_ fileSystem: RangeFS, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let inode = try fileSystem.lookup(parent: Catalog.rootInode, name: name).get().inode
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: bytes.count)?.get(), bytes,
                       file: file, line: line)
        fileSystem.release(handle)
    }

    /// Opens `name` in the root and closes it; returns whether that open started its background check against the
    /// server (`--revalidate`). The check's probe is asked for from the revalidator's queue, drained first.
    func openStartsACheck(_ fileSystem: RangeFS, _ name: String) throws -> Bool {
        let inode = try fileSystem.lookup(parent: Catalog.rootInode, name: name).get().inode
        let url = try XCTUnwrap(fileSystem.catalog.item(inode: inode)).metadata.url
        let before = origin.probedURLs.filter { $0 == url }.count
        let handle = try fileSystem.open(inode).get().handle
        fileSystem.release(handle)
        fileSystem.revalidator.work.sync(flags: .barrier) {}
        return origin.probedURLs.filter { $0 == url }.count > before
    }

    /// Dates the listing this cache keeps for `url` `seconds` back, as if the mount that read it ran that long ago.
    func ageKeptListing(_ url: String, by seconds: Int) {
        let path = directory.path + "/listings/" + String(SHA256.hexDigest(url).prefix(32))
        var times = [timespec(tv_sec: time(nil) - seconds, tv_nsec: 0), timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0, "the kept listing of \(url) at \(path)")
    }

    // A remount whose kept listing was read just now opens the cached object with no request at all: the listing
    // is its check. One kept for longer than `--revalidate` (60 s) leaves the open due for its check.
    func testAKeptListingCountsAsACheckFromWhenItWasRead() throws {
        serveBucket()
        let credentials = objectStore()
        let root = credentials.adopt("s3://bkt/d/").url
        try mounted(root, credentials: credentials) { try readWhole($0, "a.bin") }

        let (requests, probes) = (origin.requests.count, origin.probeCount)
        try mounted(root, credentials: credentials) { fileSystem in
            XCTAssertFalse(try openStartsACheck(fileSystem, "a.bin"), "a listing read just now is a fresh check")
        }
        XCTAssertEqual(origin.requests.dropFirst(requests).map(\.url), [], "no listing, no read")
        XCTAssertEqual(origin.probeCount, probes, "no probe, no check")

        // Shown for 10 minutes, the kept listing is not refreshed behind: a refresh that came back before the open
        // would be a fresh check (two busy cores made it come first).
        ageKeptListing(root, by: 120)
        let listings = origin.requests.count
        try mounted(root, credentials: credentials, directoryCacheTime: .seconds(600)) { fileSystem in
            XCTAssertTrue(try openStartsACheck(fileSystem, "a.bin"), "a listing read 120 s ago is no fresh check")
        }
        XCTAssertFalse(origin.requests.dropFirst(listings).contains { $0.url.contains("list-type=2") },
                       "the kept listing was shown as it was")
    }

    // A refresh of the kept listing that fails (the store cannot be reached) is tried again later, but states
    // nothing: the open is as due for its check as the old listing leaves it.
    func testARefreshThatFailedIsNoCheck() throws {
        serveBucket()
        let credentials = objectStore()
        let root = credentials.adopt("s3://bkt/d/").url
        try mounted(root, credentials: credentials) { try readWhole($0, "a.bin") }
        ageKeptListing(root, by: 120)
        origin.isDown = true
        try mounted(root, credentials: credentials, directoryCacheTime: .seconds(0)) { fileSystem in
            // The first visit shows the kept listing and refreshes it behind; the refresh fails.
            _ = try fileSystem.directoryContents(Catalog.rootInode).get()
            let deadline = Date().addingTimeInterval(30)
            while fileSystem.directories.state.withLock({ $0.listings[Catalog.rootInode]?.running == true }),
                  Date() < deadline {
                usleep(10_000)
            }
            XCTAssertTrue(origin.requests.contains { $0.url.contains("list-type=2") }, "the refresh was tried")
            XCTAssertTrue(try openStartsACheck(fileSystem, "a.bin"), "a refresh that failed counted as a check")
        }
    }

    // A web server's JSON listing may carry ETags too, but none is taken for a check: only an object store's.
    func testAWebListingsETagIsNoCheck() throws {
        let root = "http://web/d/"
        let listing = #"[{"name":"a.bin","type":"file","size":100000,"mtime":"Wed, 25 Nov 2026 10:00:00 GMT","etag":"\"e1\""}]"#
        origin.serve(root, bytes: Array(listing.utf8))
        origin.serve(root + "a.bin", bytes: bytes, etag: "\"e1\"")
        try mounted(root, credentials: CredentialTable()) { try readWhole($0, "a.bin") }
        try mounted(root, credentials: CredentialTable()) { fileSystem in
            XCTAssertTrue(try openStartsACheck(fileSystem, "a.bin"), "a web listing's ETag counted as a check")
        }
    }
}
