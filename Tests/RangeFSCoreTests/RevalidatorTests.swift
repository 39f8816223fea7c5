import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
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

    /// Waits until `condition` holds, polling; `limit` seconds is only a safety net against a hang, not a claim on
    /// how long anything takes.
    func waitUntil(_ what: String, limit: Double = 20, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(limit)
        while !condition(), Date() < deadline { usleep(2000) }
        XCTAssertTrue(condition(), "\(what) within \(limit) s")
    }

    // Issue 39, acceptance 3: an origin that accepts connections and never answers holds its own checks only. The
    // ESTALE answer of a file on another, healthy origin, and the offline check of another file there, are done
    // while the hung origin's probe is still pending.
    func testAnOriginThatNeverAnswersHoldsNoCheckOfAnotherOrigin() throws {
        let stuck = "http://stuck/hung.bin"
        let changing = url
        let offlineHealthy = "http://origin/other.bin"
        for file in [stuck, changing, offlineHealthy] { origin.serve(file, bytes: bytes) }
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [stuck, changing, offlineHealthy],
                                                directory: directory.path)
        let revalidator = fileSystem.revalidator
        let catalog = fileSystem.catalog
        let stuckEntry = try fileSystem.entry(for: try XCTUnwrap(catalog.item(url: stuck)))
        let changingItem = try XCTUnwrap(catalog.item(url: changing))
        let changingEntry = try fileSystem.entry(for: changingItem)
        _ = try fileSystem.entry(for: try XCTUnwrap(catalog.item(url: offlineHealthy)))
        let stuckProbesBefore = origin.probedURLs.filter { $0 == stuck }.count
        origin.hang(host: "stuck")
        defer { origin.release(host: "stuck") }
        revalidator.markOffline(stuck, reason: "timed out")
        revalidator.markOffline(offlineHealthy, reason: "connection refused")

        // An open of the hung file checks it; its probe reaches the origin and stays unanswered.
        revalidator.revalidate(stuckEntry, knownChanged: false)
        waitUntil("the hung origin holds the probe") { origin.heldRequests(host: "stuck") == 1 }

        // The healthy file changed on its server; a read that found it waits for its ESTALE answer.
        origin.serve(changing, bytes: Array(bytes.prefix(1000)), etag: "\"v2\"")
        let staleAnswered = expectation(description: "the ESTALE answer of the healthy file")
        revalidator.answerStale(0..<4096, of: changingEntry, inode: changingItem.inode) { staleAnswered.fulfill() }
        // The offline check (every 5 s on its timer), started by hand, off this thread.
        let offlineStarted = expectation(description: "the offline checks started")
        DispatchQueue.global().async {
            revalidator.checkOfflineFiles()
            offlineStarted.fulfill()
        }

        wait(for: [staleAnswered, offlineStarted], timeout: 20)
        waitUntil("the offline check of the healthy file") { revalidator.offlineReason(offlineHealthy) == nil }
        XCTAssertEqual(origin.heldRequests(host: "stuck"), 1,
                       "both were done while the hung origin's probe was pending, and its own check joined it")
        XCTAssertTrue(changingEntry.isStale, "the change was handled before the reader's ESTALE answer")
        XCTAssertEqual(catalog.item(url: changing)?.metadata.etag, "\"v2\"")
        XCTAssertNotNil(revalidator.offlineReason(stuck), "no answer yet: still offline")

        origin.release(host: "stuck")
        revalidator.settle()
        XCTAssertEqual(origin.probedURLs.filter { $0 == stuck }.count - stuckProbesBefore, 1,
                       "the open's check and the offline check of the hung file shared one probe")
        XCTAssertNotNil(revalidator.offlineReason(stuck), "a timeout keeps it offline")
        XCTAssertFalse(stuckEntry.isStale, "an unanswered check is no reason to drop what is cached")
    }

    // Issue 39: checks of one URL asked while its probe is in flight share that probe; a change reported after it
    // was sent gets a probe of its own once it ends, and the reader's ESTALE answer waits for that one.
    func testChecksOfOneURLShareItsProbeInFlightAndAChangeGetsItsOwn() throws {
        let stuck = "http://stuck/hung.bin"
        origin.serve(stuck, bytes: bytes)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [stuck], directory: directory.path)
        let revalidator = fileSystem.revalidator
        let item = try XCTUnwrap(fileSystem.catalog.item(url: stuck))
        let entry = try fileSystem.entry(for: item)
        let before = origin.probedURLs.count
        origin.hang(host: "stuck")
        defer { origin.release(host: "stuck") }
        revalidator.markOffline(stuck, reason: "timed out")

        revalidator.revalidate(entry, knownChanged: false)
        revalidator.revalidate(entry, knownChanged: false)
        let offlineStarted = expectation(description: "the offline check started")
        DispatchQueue.global().async {
            revalidator.checkOfflineFiles()
            offlineStarted.fulfill()
        }
        wait(for: [offlineStarted], timeout: 20)
        waitUntil("the hung origin holds the probe") { origin.heldRequests(host: "stuck") == 1 }
        // Reported after the probe was sent: that probe's answer may predate the change.
        let staleAnswered = expectation(description: "the ESTALE answer")
        revalidator.answerStale(0..<4096, of: entry, inode: item.inode) { staleAnswered.fulfill() }
        XCTAssertEqual(origin.probedURLs.count - before, 1, "one probe in flight for the URL")
        XCTAssertFalse(entry.isStale)

        origin.release(host: "stuck")
        wait(for: [staleAnswered], timeout: 20)
        revalidator.settle()
        XCTAssertEqual(origin.probedURLs.count - before, 2, "the three checks shared one probe; the change had its own")
        XCTAssertTrue(entry.isStale, "a change a fetch saw makes the entry stale, even when the probe says the same")
        XCTAssertNil(revalidator.offlineReason(stuck), "the change's probe was answered: online again")
    }

    // Issue 39: an origin runs at most `probesPerOrigin` probes at once; the other checks of its files wait for a
    // slot (not as transfers), and run as the probes before them end.
    func testAnOriginRunsABoundedNumberOfProbesAndTheOtherChecksFollow() throws {
        let urls = (0..<24).map { "http://stuck/file\($0).bin" }
        for url in urls { origin.serve(url, bytes: Array(bytes.prefix(4096))) }
        let fileSystem = try makeTestFileSystem(origin: origin, urls: urls, directory: directory.path)
        let revalidator = fileSystem.revalidator
        for url in urls {
            _ = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(url: url)))
            revalidator.markOffline(url, reason: "connection refused")
        }
        let before = origin.probedURLs.count
        origin.hang(host: "stuck")
        defer { origin.release(host: "stuck") }
        let started = expectation(description: "the offline checks started")
        DispatchQueue.global().async {
            revalidator.checkOfflineFiles()
            started.fulfill()
        }
        wait(for: [started], timeout: 20)
        let bound = Revalidator.probesPerOrigin
        waitUntil("\(bound) probes held") { origin.heldRequests(host: "stuck") == bound }
        XCTAssertEqual(origin.probedURLs.count - before, bound, "the other checks wait for a slot")

        origin.release(host: "stuck")
        revalidator.settle()
        XCTAssertEqual(origin.probedURLs.count - before, urls.count, "each file probed once")
        XCTAssertEqual(revalidator.offlineFiles.count, bound, "the held probes timed out: those files stay offline")
    }

    // Issue 39: a check a reader waits for (its ESTALE answer) takes the next free slot of its origin, ahead of
    // the offline checks that were waiting for one before it.
    func testAReadersCheckGoesAheadOfTheOfflineChecksWaitingForASlot() throws {
        let bound = Revalidator.probesPerOrigin
        let urls = (0...(bound + 4)).map { "http://stuck/file\($0).bin" }
        for url in urls { origin.serve(url, bytes: Array(bytes.prefix(4096))) }
        let fileSystem = try makeTestFileSystem(origin: origin, urls: urls, directory: directory.path)
        let revalidator = fileSystem.revalidator
        for url in urls.dropLast() {
            _ = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(url: url)))
            revalidator.markOffline(url, reason: "connection refused")
        }
        let readItem = try XCTUnwrap(fileSystem.catalog.item(url: urls.last!))
        let readEntry = try fileSystem.entry(for: readItem)
        let before = origin.probedURLs.count
        origin.hang(host: "stuck")
        defer { origin.release(host: "stuck") }
        let started = expectation(description: "the offline checks started")
        DispatchQueue.global().async {
            revalidator.checkOfflineFiles()
            started.fulfill()
        }
        wait(for: [started], timeout: 20)
        waitUntil("\(bound) probes held") { origin.heldRequests(host: "stuck") == bound }

        let staleAnswered = expectation(description: "the reader's ESTALE answer")
        revalidator.answerStale(0..<4096, of: readEntry, inode: readItem.inode) { staleAnswered.fulfill() }
        XCTAssertEqual(origin.probedURLs.count - before, bound, "no slot free: the reader's check waits too")
        origin.releaseOldest(host: "stuck")
        waitUntil("the freed slot's probe") { origin.probedURLs.count - before == bound + 1 }
        XCTAssertEqual(origin.probedURLs.last, urls.last, "the reader's check went ahead of 4 offline checks")

        origin.release(host: "stuck")
        wait(for: [staleAnswered], timeout: 20)
        XCTAssertTrue(readEntry.isStale, "a change a fetch saw makes the entry stale even without an answer")
        revalidator.settle()
        XCTAssertEqual(origin.probedURLs.count - before, urls.count, "each file probed once")
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
