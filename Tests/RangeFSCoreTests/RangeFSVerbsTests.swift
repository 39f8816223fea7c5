import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 48: RangeFS's front door. Each verb the control channel offers does its whole operation in the core:
/// these call the verbs directly (no control service) and look at every part the verb must have changed.
final class RangeFSVerbsTests: XCTestCase {
    let first = "http://origin/first.bin", second = "http://origin/second.bin"
    let bytes = pseudoRandomBytes(count: 600_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var kernel: KernelRecorder!
    var fileSystem: RangeFS!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "verbs")
        origin = MemoryOrigin()
        origin.serve(first, bytes: bytes)
        origin.serve(second, bytes: bytes)
        kernel = KernelRecorder()
        fileSystem = try makeTestFileSystem(origin: origin, urls: [first, second], directory: directory.path,
                                            kernel: kernel) { settings in
            settings.revalidateAfter = .seconds(3600)  // so that whether a file was validated shows in isDue
        }
    }

    override func tearDown() {
        fileSystem = nil
        kernel = nil
        origin = nil
        directory = nil
        super.tearDown()
    }

    func item(_ name: String) throws -> CatalogItem { try XCTUnwrap(fileSystem.catalog.item(named: name)) }

    func savedURLs() throws -> [String] { try fileSystem.mountedSet.savedSet.files().map(\.url).sorted() }

    /// Reads the whole of `name` through a handle, as a program would, and waits for its blocks to be written.
    func readAll(_ name: String) throws {
        let handle = try fileSystem.open(try item(name).inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: bytes.count)?.get(), bytes)
        fileSystem.release(handle)
        fileSystem.store.waitForWrites()
    }

    /// `remove` takes the file out of every part: the catalog, the kernel's names, the revalidator's marks, the
    /// scheduler's fills, the store's open entries and files, and the saved set.
    func testRemoveTakesTheFileOutOfEveryPart() throws {
        try readAll("first.bin")
        let removed = try item("first.bin")
        let entry = try fileSystem.entry(for: removed)
        let dataPath = entry.dataPath
        fileSystem.markProbed(offline: [first: "test: its server is away"])
        fileSystem.saveMountedSet()
        XCTAssertEqual(try savedURLs(), [first, second])

        XCTAssertEqual(fileSystem.remove(name: "first.bin"), .done("first.bin"))
        XCTAssertNil(fileSystem.catalog.item(named: "first.bin"))
        XCTAssertTrue(fileSystem.catalog.items(url: first).isEmpty)
        XCTAssertTrue(kernel.notices.contains(.name("first.bin", parent: removed.parent)),
                      "the kernel was told before the answer: \(kernel.notices)")
        XCTAssertNil(fileSystem.revalidator.offlineReason(first), "the revalidator forgot it")
        XCTAssertFalse(fileSystem.scheduler.isFilling(entry) || fileSystem.scheduler.isTransferring(entry))
        XCTAssertNil(fileSystem.store.openEntry(for: first), "its entry is closed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dataPath), "its cached data is deleted")
        XCTAssertNil(fileSystem.store.storedMetadata(for: first), "nothing of it is left in the cache")
        XCTAssertEqual(try savedURLs(), [second], "the saved set holds the other file only")
        XCTAssertEqual(fileSystem.remove(name: "first.bin"),
                       .failed("no file named 'first.bin' in this mount; see rangefs status"))
    }

    /// With `keepData` the cached bytes stay on disk for a later add, and nothing else of the file does.
    func testRemoveKeepingTheDataLeavesItOnDiskAndTheFileOutOfTheMount() throws {
        try readAll("first.bin")
        let dataPath = try fileSystem.entry(for: try item("first.bin")).dataPath
        XCTAssertEqual(fileSystem.remove(name: "first.bin", keepData: true), .done("first.bin"))
        XCTAssertNil(fileSystem.catalog.item(named: "first.bin"))
        XCTAssertNil(fileSystem.store.openEntry(for: first), "its entry is closed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: dataPath), "its cached data stays")
        XCTAssertEqual(fileSystem.add(url: first), .done("first.bin"))
        XCTAssertEqual(try fileSystem.entry(for: try item("first.bin")).cachedBytes, UInt64(bytes.count))
    }

    /// A saved file the mount could not mount stays in the saved set until `remove` names it; then its cached
    /// data goes too.
    func testRemoveOfAnUnmountedSavedFileDropsItFromTheSavedSetAndTheCache() throws {
        let gone = "http://origin/gone.bin"
        origin.serve(gone, bytes: bytes)
        XCTAssertEqual(fileSystem.add(url: gone), .done("gone.bin"))
        try readAll("gone.bin")
        XCTAssertEqual(fileSystem.remove(name: "gone.bin", keepData: true), .done("gone.bin"))
        XCTAssertNotNil(fileSystem.store.storedMetadata(for: gone), "kept for the next test step")
        fileSystem.keepUnmounted([SavedFile(name: "gone.bin", url: gone)])
        fileSystem.saveMountedSet()
        XCTAssertEqual(try savedURLs(), [first, gone, second])
        XCTAssertEqual(fileSystem.status(all: true).files.first { $0.name == "gone.bin" }?.state, "unmounted")

        XCTAssertEqual(fileSystem.remove(name: "gone.bin"), .done("gone.bin"))
        XCTAssertEqual(try savedURLs(), [first, second])
        XCTAssertTrue(fileSystem.mountedSet.unmounted.isEmpty)
        XCTAssertNil(fileSystem.store.storedMetadata(for: gone), "its cached data is deleted")
    }

    /// The mount's probes, recorded through `markProbed`: the files it reached need no check on their next open,
    /// the others are served offline.
    func testMarkProbedRecordsTheValidatedAndTheOfflineFiles() throws {
        XCTAssertTrue(fileSystem.revalidator.isDue(first) && fileSystem.revalidator.isDue(second))
        fileSystem.markProbed(offline: [second: "connection refused"])
        XCTAssertFalse(fileSystem.revalidator.isDue(first), "validated by the mount's probe")
        XCTAssertNil(fileSystem.revalidator.offlineReason(first))
        XCTAssertEqual(fileSystem.revalidator.offlineReason(second), "connection refused")
        XCTAssertEqual(fileSystem.status(all: true).files.first { $0.name == "second.bin" }?.state, "offline")
    }

    /// `pause` marks the entry paused and takes its fill off the scheduler; `resume` clears the mark.
    func testPauseStopsTheFillAndResumeClearsIt() throws {
        let entry = try fileSystem.entry(for: try item("first.bin"))
        fileSystem.scheduler.fill(entry, url: first)
        XCTAssertEqual(fileSystem.pause(name: "first.bin"), .done("first.bin"))
        XCTAssertTrue(entry.isPaused)
        XCTAssertFalse(fileSystem.scheduler.isFilling(entry), "no fill is queued for a paused file")
        if !entry.isComplete {
            XCTAssertEqual(fileSystem.status(all: true).files.first { $0.name == "first.bin" }?.state, "paused")
        }
        XCTAssertEqual(fileSystem.resume(name: "first.bin"), .done("first.bin"))
        XCTAssertFalse(entry.isPaused)
        XCTAssertNotEqual(fileSystem.status(all: true).files.first { $0.name == "first.bin" }?.state, "paused")
        XCTAssertEqual(fileSystem.pause(name: "none.bin"),
                       .failed("no file named 'none.bin' in this mount; see rangefs status"))
        XCTAssertEqual(fileSystem.pause(name: nil, all: true), .done("first.bin"),
                       "all: the files whose entry is open, and no other")
        XCTAssertNil(fileSystem.store.openEntry(for: second), "pausing all opened no entry")
    }

    /// `evict` stops the file's fill and deletes its data; the file stays mounted, and a pinned one is refused.
    func testEvictDeletesTheDataAndKeepsTheFile() throws {
        try readAll("first.bin")
        let dataPath = try fileSystem.entry(for: try item("first.bin")).dataPath
        XCTAssertEqual(fileSystem.evict(name: "first.bin"), .done("first.bin"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dataPath))
        XCTAssertNil(fileSystem.store.openEntry(for: first))
        XCTAssertNotNil(fileSystem.catalog.item(named: "first.bin"), "still mounted")
        XCTAssertEqual(fileSystem.status(all: true).files.first { $0.name == "first.bin" }?.cachedBytes, 0)

        XCTAssertEqual(fileSystem.pin(name: "second.bin"), .done("second.bin"))
        XCTAssertEqual(fileSystem.evict(name: "second.bin"), .failed("second.bin is pinned; it is never evicted"))
        XCTAssertEqual(try fileSystem.mountedSet.savedSet.files().first { $0.url == second }?.pinned, true)
    }

    /// `verify` of a file read whole checks every block and finds them good.
    func testVerifyChecksEveryCachedBlock() throws {
        XCTAssertEqual(fileSystem.verify(name: "first.bin"), .done("first.bin: no block is cached yet; nothing to check"))
        try readAll("first.bin")
        let blocks = (bytes.count + 65535) / 65536
        XCTAssertEqual(fileSystem.verify(name: "first.bin"),
                       .done("first.bin: \(blocks) blocks checked against the CRC32C taken when they arrived, all good"))
        XCTAssertEqual(fileSystem.verify(name: "none.bin"),
                       .failed("no file named 'none.bin' in this mount; see rangefs status"))
    }
}
