import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSControl
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// The control channel's commands, answered in-process by `ControlService.handle` against an in-memory origin.
final class ControlHandlerTests: XCTestCase {
    let first = "http://origin/first.bin", second = "http://origin/second.bin"
    let bytes = pseudoRandomBytes(count: 1_000_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var fileSystem: RangeFS!
    var control: ControlService!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "control")
        origin = MemoryOrigin()
        origin.serve(first, bytes: bytes)
        origin.serve(second, bytes: bytes)
        origin.serve("http://origin/third.bin", bytes: bytes)
        fileSystem = try makeTestFileSystem(origin: origin, urls: [first, second], directory: directory.path)
        control = ControlService(fileSystem: fileSystem)
    }

    override func tearDown() {
        control = nil
        fileSystem = nil
        origin = nil
        directory = nil
        super.tearDown()
    }

    func handle(_ command: ControlRequest.Command, name: String? = nil, url: String? = nil, all: Bool? = nil,
                keepData: Bool? = nil) -> ControlResponse {
        control.handle(ControlRequest(command: command, name: name, url: url, all: all, keepData: keepData))
    }

    func entry(_ name: String) throws -> CacheEntry {
        try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.item(named: name)))
    }

    func readAll(_ name: String) throws {
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: name)).inode
        let handle = try fileSystem.open(inode).get().handle
        defer { fileSystem.release(handle) }
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: bytes.count)?.get(), bytes)
        fileSystem.store.waitForWrites()
    }

    func savedNames() throws -> [String] { try fileSystem.mountedSet.savedSet.files().map(\.name).sorted() }

    func testStatusListsEveryFileWithItsStateAndMap() throws {
        try readAll("first.bin")
        let response = handle(.status, all: true)
        let files = try XCTUnwrap(response.files)
        XCTAssertEqual(files.map(\.name), ["first.bin", "second.bin"])
        XCTAssertEqual(files.map(\.state), ["complete", "empty"])
        XCTAssertEqual(files[0].cachedBytes, UInt64(bytes.count))
        XCTAssertEqual(files[0].map, String(repeating: "#", count: ControlService.mapWidth))
        XCTAssertEqual(files[1].map, String(repeating: " ", count: ControlService.mapWidth))
        XCTAssertEqual(response.totals?.files, 2)
        XCTAssertEqual(response.totals?.cachedBytes, UInt64(bytes.count))
        XCTAssertNil(fileSystem.store.openEntry(for: fileSystem.catalog.item(named: "second.bin")!.metadata.url),
                     "status opens no entry")
    }

    /// Issue 24: by default status holds the totals and the files worth a look, not the complete or untouched.
    func testStatusByDefaultShowsTheTotalsAndTheFilesThatArePartial() throws {
        try readAll("first.bin")
        let second = try XCTUnwrap(fileSystem.catalog.item(named: "second.bin"))
        let handle = try fileSystem.open(second.inode).get().handle
        XCTAssertNotNil(fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096))
        fileSystem.release(handle)
        // The read is answered once its block is here; the transfer that brought it may run on to the end of its
        // run, and the file shows as downloading until it ends.
        let entry = try entry("second.bin")
        let deadline = Date().addingTimeInterval(60)
        while fileSystem.scheduler.isTransferring(entry) && Date() < deadline { usleep(1000) }
        fileSystem.store.waitForWrites()
        let response = self.handle(.status)
        XCTAssertEqual(response.files?.map(\.name), ["second.bin"])
        XCTAssertEqual(response.files?.map(\.state), ["partial"])
        XCTAssertEqual(response.totals?.files, 2)
    }

    func testAddMountsAURLAndSavesItRefusesDuplicatesAndNamesAFailingServer() throws {
        let added = handle(.add, url: "http://origin/third.bin")
        XCTAssertTrue(added.ok, added.error ?? "")
        XCTAssertEqual(added.message, "third.bin")
        XCTAssertNotNil(fileSystem.catalog.item(named: "third.bin"))
        XCTAssertEqual(try savedNames(), ["first.bin", "second.bin", "third.bin"])
        let again = handle(.add, url: first)
        XCTAssertFalse(again.ok)
        XCTAssertTrue(again.error?.contains("already mounted as first.bin") ?? false, again.error ?? "")
        let missing = handle(.add, url: "http://origin/none.bin")
        XCTAssertFalse(missing.ok)
        XCTAssertTrue(missing.error?.contains("HTTP 404") ?? false, missing.error ?? "")
    }

    func testAddKeepsAQueryApartTakesANewTokenForTheSameFileAndRmForgetsIt() throws {
        let identity = "http://origin/signed.bin?token=***"
        origin.serve(identity, bytes: bytes)  // the core asks by identity; the wire URL is the HTTP layer's
        let added = handle(.add, url: "http://origin/signed.bin?token=FIRST-secret")
        XCTAssertTrue(added.ok, added.error ?? "")
        XCTAssertEqual(fileSystem.catalog.item(named: "signed.bin")?.metadata.url, identity)
        XCTAssertEqual(fileSystem.credentials.wireURL(for: identity), "http://origin/signed.bin?token=FIRST-secret")
        let credentialsFile = directory.path + "/credentials.json"
        XCTAssertTrue(try String(contentsOfFile: credentialsFile, encoding: .utf8).contains("FIRST-secret"))
        XCTAssertFalse(try String(contentsOfFile: directory.path + "/catalog.json", encoding: .utf8).contains("secret"))

        let renewed = handle(.add, url: "http://origin/signed.bin?token=SECOND-secret")
        XCTAssertTrue(renewed.ok, renewed.error ?? "")
        XCTAssertEqual(renewed.message, "signed.bin (new credentials)")
        XCTAssertEqual(fileSystem.credentials.wireURL(for: identity), "http://origin/signed.bin?token=SECOND-secret")
        XCTAssertFalse(try String(contentsOfFile: credentialsFile, encoding: .utf8).contains("FIRST-secret"))
        XCTAssertFalse(handle(.add, url: "http://origin/signed.bin?token=SECOND-secret").ok, "the same URL again")

        XCTAssertTrue(handle(.rm, name: "signed.bin").ok)
        XCTAssertEqual(fileSystem.credentials.wireURL(for: identity), identity)
        XCTAssertFalse(FileManager.default.fileExists(atPath: credentialsFile), "no credentials are left to keep")
    }

    func testRmRemovesTheFileItsDataAndItsSavedLine() throws {
        try readAll("first.bin")
        let dataPath = try entry("first.bin").dataPath
        XCTAssertTrue(handle(.rm, name: "first.bin").ok)
        XCTAssertNil(fileSystem.catalog.item(named: "first.bin"))
        XCTAssertEqual(try savedNames(), ["second.bin"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: dataPath), "the cached data is deleted")
        XCTAssertFalse(handle(.rm, name: "first.bin").ok, "gone already")
    }

    func testRmKeepDataLeavesTheCacheForALaterAdd() throws {
        try readAll("first.bin")
        XCTAssertTrue(handle(.rm, name: "first.bin", keepData: true).ok)
        XCTAssertTrue(handle(.add, url: first).ok)
        XCTAssertEqual(try entry("first.bin").cachedBytes, UInt64(bytes.count), "found again in the cache")
    }

    func testAddOfAnUnreachableURLWithCachedDataServesItFromTheCache() throws {
        try readAll("first.bin")
        XCTAssertTrue(handle(.rm, name: "first.bin", keepData: true).ok)
        origin.isDown = true
        let added = handle(.add, url: first)
        XCTAssertTrue(added.ok, added.error ?? "")
        XCTAssertTrue(added.message?.contains("served from the cache") ?? false, added.message ?? "")
        XCTAssertNotNil(fileSystem.revalidator.offlineReason(first), "checked again until its server answers")
        XCTAssertEqual(try entry("first.bin").cachedBytes, UInt64(bytes.count))
        let status = handle(.status, all: true)
        XCTAssertEqual(status.files?.first { $0.name == "first.bin" }?.state, "offline")

        let uncached = handle(.add, url: "http://origin/third.bin")
        XCTAssertFalse(uncached.ok, "nothing cached and no server: nothing to mount")
        XCTAssertTrue(uncached.error?.contains("third.bin") ?? false, uncached.error ?? "")
    }

    func testPauseAndResumeOneFileOrAll() throws {
        XCTAssertTrue(handle(.pause, name: "first.bin").ok)
        XCTAssertTrue(try entry("first.bin").isPaused)
        XCTAssertFalse(try entry("second.bin").isPaused)
        XCTAssertTrue(handle(.pause, all: true).ok)
        XCTAssertTrue(try entry("second.bin").isPaused)
        XCTAssertTrue(handle(.resume, all: true).ok)
        XCTAssertFalse(try entry("first.bin").isPaused || entry("second.bin").isPaused)
        XCTAssertFalse(handle(.pause, name: "none.bin").ok)
    }

    func testPinCompletesTheFileAndIsSaved() throws {
        XCTAssertTrue(handle(.pin, name: "second.bin").ok)
        let pinned = try entry("second.bin")
        let deadline = Date().addingTimeInterval(10)
        while !pinned.isComplete && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(pinned.isComplete, "a pinned file is downloaded completely")
        XCTAssertEqual(try fileSystem.mountedSet.savedSet.files().first { $0.name == "second.bin" }?.pinned, true)
        XCTAssertEqual(handle(.status, all: true).files?.first { $0.name == "second.bin" }?.pinned, true)
    }

    func testEvictRefusesOpenAndPinnedFilesAndDropsAClosedOnesData() throws {
        try readAll("first.bin")
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "first.bin")).inode
        let handleNumber = try fileSystem.open(inode).get().handle
        XCTAssertTrue(handle(.evict, name: "first.bin").error?.contains("is open") ?? false)
        fileSystem.release(handleNumber)
        try entry("first.bin").setPinned(true)
        XCTAssertTrue(handle(.evict, name: "first.bin").error?.contains("is pinned") ?? false)
        try entry("first.bin").setPinned(false)
        XCTAssertTrue(handle(.evict, name: "first.bin").ok)
        XCTAssertEqual(try entry("first.bin").cachedBytes, 0)
        XCTAssertNotNil(fileSystem.catalog.item(named: "first.bin"), "it stays mounted")
    }

    func testVerifyFindsABlockThatRotted() throws {
        try readAll("first.bin")
        let cached = try entry("first.bin")
        XCTAssertTrue(handle(.verify, name: "first.bin").ok)
        try SystemFile(path: cached.dataPath, flags: O_RDWR).write([0xEE], at: 70_000)
        let response = handle(.verify, name: "first.bin")
        XCTAssertFalse(response.ok)
        XCTAssertTrue(response.error?.contains("1 failed and will be fetched again") ?? false, response.error ?? "")
        XCTAssertFalse(cached.isPresent(1))
    }

    /// `rangefs add`s that arrive at once (control requests run on several threads) leave credentials.json whole and
    /// holding every token, and no save fails: rounds of 8 concurrent adds of files with tokens of different
    /// lengths, the file read back after each round. (Before, saves shared one temporary file and failed with
    /// `rename ...: No such file or directory`.)
    func testConcurrentAddsOfURLsWithTokensKeepEveryTokenInAWholeCredentialsFile() throws {
        // Its own mount and cache, logging to `logged`.
        let folder = try TemporaryDirectory(prefix: "control-tokens")
        let logged = LockedBox<[String]>([])
        var logger = Logger(label: "test") { _ in CommitHealthTests.CapturingHandler(lines: logged) }
        logger.logLevel = .notice
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [], directory: folder.path, logger: logger)
        let control = ControlService(fileSystem: fileSystem)
        var tokens: [String] = []
        for round in 0..<6 {
            let added = (0..<8).map { index -> (url: String, token: String) in
                let name = "r\(round)-f\(index).bin"
                origin.serve("http://origin/\(name)?token=***", bytes: Array(bytes.prefix(4096)))
                let token = "T\(round)x\(index)-" + String(repeating: "z", count: (round * 8 + index) * 13 % 200)
                return ("http://origin/\(name)?token=" + token, token)
            }
            let failures = LockedBox<[String]>([])
            DispatchQueue.concurrentPerform(iterations: added.count) { index in
                let response = control.handle(ControlRequest(command: .add, url: added[index].url))
                if !response.ok { failures.withLock { $0.append(response.error ?? "add failed") } }
            }
            XCTAssertEqual(failures.withLock { $0 }, [])
            tokens += added.map(\.token)
            let saved = try SavedCredentials(cacheRoot: fileSystem.store.root).load()  // throws if the JSON is not whole
            let queries = saved["http://origin:80"]?.queries ?? [:]
            let missing = tokens.filter { token in !queries.values.contains { $0 == "token=" + token } }
            XCTAssertEqual(missing, [], "round \(round): tokens credentials.json lost")
        }
        XCTAssertEqual(logged.withLock { $0 }.filter { $0.contains("credentials") }.prefix(3), [])
    }
}
