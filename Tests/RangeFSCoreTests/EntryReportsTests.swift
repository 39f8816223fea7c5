import Dispatch
import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSSystem
import RangeFSPlatform
import RangeFSTestSupport
import XCTest

/// Issue 48, nothing points back up: the store and the scheduler report through a queue the file system drains
/// (EventQueue.swift, EntryEvent.swift), and the work they or the file system have for an entry is counted on the
/// entry (`EntryUse.addWork`), where the store reads it before it releases an idle entry.
final class EntryReportsTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "entry-reports")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// What is sent before anyone drains waits, in order; `close` ends the drain and drops what is sent after.
    func testTheQueueKeepsOrderWaitsForItsDrainerAndEndsAtClose() {
        let queue = EventQueue<Int>()
        for value in 1...3 { queue.send(value) }
        XCTAssertEqual([queue.next(), queue.next(), queue.next()], [1, 2, 3])
        let drained = LockedBox<[Int]>([])
        let ended = DispatchSemaphore(value: 0)
        let drainerEnded = DispatchSemaphore(value: 0)
        startThread(name: "test-drain") {
            while let value = queue.next() {
                drained.withLock { $0.append(value) }
                if value == 1000 { ended.signal() }
            }
            drainerEnded.signal()
        }
        for value in 4...1000 { queue.send(value) }
        XCTAssertEqual(ended.wait(timeout: .now() + 60), .success, "drained (a hang only)")
        XCTAssertEqual(drained.withLock { $0 }, Array(4...1000), "one drainer takes every event, in order")
        queue.close()
        XCTAssertEqual(drainerEnded.wait(timeout: .now() + 60), .success, "the waiting drainer was woken by the close")
        queue.send(1001)
        // A call after the close, once the close's wake-up was taken: it answers at once. It waited for ever (a hang
        // of the whole core suite, with two busy cores, when the drainer took the wake-up first).
        let answered = DispatchSemaphore(value: 0)
        let after = LockedBox<Int??>(nil)
        startThread(name: "test-after-close") {
            let value = queue.next()
            after.withLock { $0 = .some(value) }
            answered.signal()
        }
        XCTAssertEqual(answered.wait(timeout: .now() + 60), .success, "a call after the close was answered")
        XCTAssertEqual(after.withLock { $0 }, .some(nil), "closed: nothing more comes, and what is sent after is dropped")
    }

    /// A fill the scheduler runs keeps its entry open through the store's idle release, with nothing asked of the
    /// layers above: the scheduler counts its fill and its transfers on the entry. Once they end, the count is back
    /// to zero and the entry is released.
    func testAFillKeepsItsEntryOpenUntilItEnds() throws {
        let url = "http://origin/fill.bin"
        let origin = MemoryOrigin()
        origin.serve(url, bytes: pseudoRandomBytes(count: 300_000, seed: 48))
        var settings = StoreSettings()
        settings.idleEntryTime = .zero
        let store = try CacheStore(root: directory.path, settings: settings, logger: Logger(label: "test"))
        defer { store.close() }
        var policy = FetchPolicy()
        policy.retryDelay = .milliseconds(5)
        let scheduler = FetchScheduler(fetcher: origin, policy: policy, logger: Logger(label: "test"))
        let metadata = try origin.probeAll([url])[0].get()
        let entry = try store.entry(for: metadata, blockSize: 65536)
        origin.hang(host: "origin")
        scheduler.fill(entry, url: url)
        XCTAssertTrue(entry.use.hasWork, "a fill queued or running is work for the entry")
        store.commitAll()
        XCTAssertTrue(store.openEntry(for: url) === entry, "the store keeps an entry with a fill open")
        origin.release(host: "origin")
        // The fill completes the file (a generous deadline, for a hang only); a complete file's job leaves the
        // queue at the scheduler's next round, or here (whichever comes first: each is counted once), and its
        // transfers end.
        let deadline = Date().addingTimeInterval(60)
        while !entry.isComplete && Date() < deadline { usleep(1000) }
        XCTAssertTrue(entry.isComplete)
        scheduler.stopFilling(entry)
        while scheduler.isTransferring(entry) && Date() < deadline { usleep(1000) }
        XCTAssertFalse(entry.use.hasWork, "every piece of work that began ended once")
        store.commitAll()
        XCTAssertNil(store.openEntry(for: url), "released once nothing has work for it")
    }
}
