import Foundation
@testable import RangeFSCore
import RangeFSTestSupport
import XCTest

/// Remote changes and offline files, through the Revalidator alone (no FUSE): what a probe's answer does to the
/// catalog, the cache entry and the offline set.
final class RevalidatorTests: XCTestCase {
    let url = "http://origin/movie.bin"
    let bytes = pseudoRandomBytes(count: 300_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "revalidator")
        origin = MemoryOrigin()
    }

    override func tearDown() {
        origin = nil
        directory = nil
        super.tearDown()
    }

    func testAnOfflineFileStaysOfflineWhileItsServerIsDownAndComesBackWhenItAnswers() throws {
        origin.serve(url, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
        let revalidator = fileSystem.revalidator
        let item = try XCTUnwrap(fileSystem.catalog.item(url: url))
        let entry = try fileSystem.entry(for: item)
        revalidator.markOffline(url, reason: "connection refused at mount")

        origin.isDown = true
        revalidator.checkOfflineFilesNow()
        XCTAssertNotNil(revalidator.offlineReason(url), "a server still down keeps the file offline")
        XCTAssertFalse(entry.isStale, "an unreachable server is no reason to drop what is cached")

        origin.isDown = false
        revalidator.checkOfflineFilesNow()
        XCTAssertNil(revalidator.offlineReason(url), "the first answer from the server ends the offline state")
        XCTAssertFalse(entry.isStale, "the same version: the cached bytes stay good")
        XCTAssertEqual(fileSystem.catalog.item(url: url)?.metadata.etag, "\"v1\"")
    }

    func testAnOfflineFileThatChangedMeanwhileGetsItsNewVersion() throws {
        origin.serve(url, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
        let entry = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(url: url)))
        fileSystem.revalidator.markOffline(url, reason: "timed out")
        origin.serve(url, bytes: Array(bytes.prefix(1000)), etag: "\"v2\"")

        fileSystem.revalidator.checkOfflineFilesNow()
        XCTAssertNil(fileSystem.revalidator.offlineReason(url))
        XCTAssertTrue(entry.isStale, "the old version's entry goes stale")
        let updated = try XCTUnwrap(fileSystem.catalog.item(url: url))
        XCTAssertEqual(updated.metadata.etag, "\"v2\"")
        XCTAssertEqual(updated.metadata.size, 1000)
    }

    func testOfflineChecksProbeEachOfflineURLOnce() throws {
        let urls = (0..<300).map { "http://origin/file\($0).bin" }
        for url in urls { origin.serve(url, bytes: Array(bytes.prefix(4096))) }
        let fileSystem = try makeTestFileSystem(origin: origin, urls: urls, directory: directory.path)
        for url in urls { fileSystem.revalidator.markOffline(url, reason: "refused") }
        let before = origin.probeCount

        fileSystem.revalidator.checkOfflineFilesNow()
        XCTAssertEqual(origin.probeCount - before, urls.count, "one probe per offline URL")
        XCTAssertTrue(fileSystem.revalidator.offlineFiles.isEmpty)

        fileSystem.revalidator.checkOfflineFilesNow()
        XCTAssertEqual(origin.probeCount - before, urls.count, "nothing offline, nothing probed")
    }

    func testAChangeReachesEveryFileThatSharesTheURL() throws {
        origin.serve(url, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
        let catalog = fileSystem.catalog
        let first = try XCTUnwrap(catalog.item(url: url))
        let second = catalog.add(first.metadata, explicitName: "again.bin")
        let entry = try fileSystem.entry(for: first)
        origin.serve(url, bytes: Array(bytes.prefix(5000)), etag: "\"v2\"")

        fileSystem.revalidator.revalidate(entry, knownChanged: true)
        fileSystem.revalidator.settle()
        XCTAssertTrue(entry.isStale)
        for inode in [first.inode, second.inode] {
            XCTAssertEqual(catalog.item(inode: inode)?.metadata.etag, "\"v2\"", "inode \(inode) shows the new version")
            XCTAssertEqual(catalog.item(inode: inode)?.metadata.size, 5000)
        }
    }

    func testAnUnreachableServerKeepsTheEntryAndAChangeSeenByAFetchDoesNot() throws {
        origin.serve(url, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
        let entry = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(url: url)))

        origin.isDown = true
        fileSystem.revalidator.revalidate(entry, knownChanged: false)
        fileSystem.revalidator.settle()
        XCTAssertFalse(entry.isStale, "a check that cannot reach the server keeps serving the cache")

        origin.isDown = false
        fileSystem.revalidator.revalidate(entry, knownChanged: true)
        fileSystem.revalidator.settle()
        XCTAssertTrue(entry.isStale, "a change a fetch saw makes the entry stale, even when the probe says the same")
    }

    func testAFileGoneFromItsServerGoesStale() throws {
        origin.serve(url, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
        let entry = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(url: url)))
        origin.remove(url)
        fileSystem.revalidator.revalidate(entry, knownChanged: false)
        fileSystem.revalidator.settle()
        XCTAssertTrue(entry.isStale, "a 404 means the cached bytes are of a file that no longer exists")
    }
}

/// The catalog's index of files by URL, which revalidation, `rangefs add` and the saved set look files up in.
final class CatalogURLIndexTests: XCTestCase {
    func metadata(_ url: String, etag: String = "\"a\"") -> RemoteMetadata {
        RemoteMetadata(url: url, size: 10, etag: etag, lastModified: "")
    }

    func testFilesAreFoundByURLThroughAddsUpdatesAndRemovals() {
        let catalog = Catalog()
        let a = catalog.add(metadata("http://h/a"))
        let b = catalog.add(metadata("http://h/b"))
        let twin = catalog.add(metadata("http://h/a"), explicitName: "twin")
        XCTAssertEqual(catalog.item(url: "http://h/a")?.inode, a.inode, "the first file of a URL")
        XCTAssertEqual(catalog.items(url: "http://h/a").map(\.inode), [a.inode, twin.inode])
        XCTAssertEqual(catalog.item(url: "http://h/b")?.inode, b.inode)
        XCTAssertNil(catalog.item(url: "http://h/c"))

        catalog.update(inode: a.inode, metadata: metadata("http://h/a", etag: "\"new\""))
        XCTAssertEqual(catalog.item(url: "http://h/a")?.metadata.etag, "\"new\"", "an update is seen through the index")
        XCTAssertEqual(catalog.items(url: "http://h/a").count, 2, "an update does not index a file twice")

        catalog.remove(named: a.name)
        XCTAssertEqual(catalog.items(url: "http://h/a").map(\.inode), [twin.inode], "the twin takes the URL over")
        catalog.removeNode(twin.inode)
        XCTAssertTrue(catalog.items(url: "http://h/a").isEmpty)
        XCTAssertNil(catalog.item(url: "http://h/a"))
    }

    func testAStreamThatLearnsItsSizeStaysIndexed() {
        let catalog = Catalog()
        let item = catalog.add(.unsized(url: "http://h/live", etag: "", lastModified: ""))
        catalog.update(inode: item.inode, metadata: metadata("http://h/live"))
        XCTAssertEqual(catalog.items(url: "http://h/live").map(\.metadata.size), [10])
    }
}
