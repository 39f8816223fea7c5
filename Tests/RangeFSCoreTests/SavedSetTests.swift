import Dispatch
import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSControl
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 39: the saved set of mounted URLs has one writer, `SavedSet`: the file system writes through the one
/// its mount gave it, and a save takes its snapshot and writes it while no other save runs.
final class SavedSetTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "saved-set")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func testTheFileSystemSavesThroughTheSavedSetItWasGiven() throws {
        let origin = MemoryOrigin()
        let url = "http://origin/a.bin"
        origin.serve(url, bytes: pseudoRandomBytes(count: 1000))
        let logger = Logger(label: "test")
        let reports = EventQueue<EntryEvent>()
        let store = try CacheStore(root: directory.path, reports: reports, logger: logger)
        defer { store.close() }
        let catalog = Catalog()
        catalog.add(try origin.probeAll([url])[0].get())
        let scheduler = FetchScheduler(fetcher: origin, policy: FetchPolicy(), events: FetchScheduler.Events(reports: reports), logger: logger)
        let savedSet = SavedSet(store: store)
        let fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports,
                                 savedSet: savedSet, logger: logger)
        XCTAssertTrue(fileSystem.mountedSet.savedSet === savedSet)
        let control = ControlService(fileSystem: fileSystem)
        fileSystem.saveMountedSet()
        XCTAssertEqual(try savedSet.files().map(\.url), [url])
        XCTAssertTrue(control.handle(ControlRequest(command: .rm, name: "a.bin")).ok)
        XCTAssertEqual(try savedSet.files(), [], "rm saved the set without the file")
    }

    /// A second save waits for the first one's snapshot and write: the newer snapshot is the one left.
    func testASaveWaitsForTheOneRunning() throws {
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        defer { store.close() }
        let savedSet = SavedSet(store: store)
        let first = SavedFile(name: "first", url: "http://origin/first"), second = SavedFile(name: "second", url: "http://origin/second")
        let inSnapshot = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let secondDone = LockedBox(false)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            try? savedSet.save {  // the test checks the file's content below
                inSnapshot.signal()
                release.wait()
                return [first]
            }
        }
        inSnapshot.wait()
        DispatchQueue.global().async(group: group) {
            try? savedSet.save { [second] }  // as above
            secondDone.withLock { $0 = true }
        }
        usleep(200_000)  // room for the second save to run if it did not wait (it must not)
        XCTAssertFalse(secondDone.withLock { $0 }, "the second save ran while the first held its snapshot")
        release.signal()
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(try savedSet.files(), [second])
    }

    func testADamagedSetIsSetAsideNotOverwritten() throws {
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        defer { store.close() }
        let savedSet = SavedSet(store: store)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: directory.path + "/catalog.json"))
        XCTAssertThrowsError(try savedSet.files())
        let aside = try savedSet.setAsideDamaged()
        XCTAssertEqual(try String(contentsOfFile: aside, encoding: .utf8), "{not json")
        XCTAssertEqual(try savedSet.files(), [], "nothing saved now")
    }
}
