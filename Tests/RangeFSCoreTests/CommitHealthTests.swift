import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Group commits on a cache disk that fails them: one log line when they start failing and one when they work
/// again, spaced-out attempts, a `status` line meanwhile, and a close that says what was kept.
final class CommitHealthTests: XCTestCase {
    /// Keeps every message logged at warning level or above.
    struct CapturingHandler: LogHandler {
        let lines: LockedBox<[String]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            if event.level >= .notice { lines.withLock { $0.append("\(event.level): \(event.message)") } }
        }
    }

    let metadata = RemoteMetadata(url: "http://origin/file.bin", size: 300_000, etag: "\"v1\"", lastModified: "")
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "commit-health")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func store(_ index: Int, of entry: CacheEntry, in store: CacheStore, bytes: [UInt8]) {
        let range = entry.byteRange(of: index..<(index + 1))
        Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]).withUnsafeBytes { raw in
            entry.put(block: index, buffer: BlockBuffer(copying: raw), background: false, budgeted: true)
        }
        store.waitForWrites()
    }

    func testFailingCommitsLogOnceBackOffShowInStatusAndTheCloseSaysWhatWasKept() throws {
        let lines = LockedBox<[String]>([])
        let logger = Logger(label: "test") { _ in CapturingHandler(lines: lines) }
        let bytes = pseudoRandomBytes(count: 300_000)
        let cache = try CacheStore(root: directory.path, logger: logger)
        let entry = try cache.entry(for: metadata, blockSize: 65536)
        store(0, of: entry, in: cache, bytes: bytes)
        cache.commitAll()
        XCTAssertEqual(cache.cacheProblems, [])

        // The entry's file goes away under the store (its descriptors closed, so that each use opens it by its
        // path): every commit of it fails (as on a full disk).
        let aside = entry.directory + ".aside"
        store(1, of: entry, in: cache, bytes: bytes)
        XCTAssertEqual(rename(entry.directory, aside), 0)
        cache.descriptors.closeIdleDescriptors()
        for _ in 0..<5 { cache.commitAll() }
        XCTAssertEqual(lines.withLock { $0 }.filter { $0.contains("commits are failing") }.count, 1,
                       "one line when commits start failing, not one per attempt: \(lines.withLock { $0 })")
        let problem = try XCTUnwrap(cache.cacheProblems.first, "status shows the failing commits")
        XCTAssertTrue(problem.contains("cache commits are failing (5 attempts"), problem)
        let health = cache.ledger.commitHealth.withLock { $0 }
        XCTAssertEqual(health.delay(interval: .milliseconds(500)), CommitHealth.maximumBackoff,
                       "after 5 failures the attempts are 8 s apart")
        XCTAssertEqual(CommitHealth(failingSince: .now, failures: 1).delay(interval: .milliseconds(500)), .seconds(1))
        XCTAssertEqual(entry.uncommittedBytes, 65536)

        // Back in place: the next commit works, and says so once.
        XCTAssertEqual(rename(aside, entry.directory), 0)
        cache.commitAll()
        XCTAssertEqual(cache.cacheProblems, [])
        let logged = lines.withLock { $0 }
        XCTAssertEqual(logged.filter { $0.contains("commits work again, after 5 failed attempts") }.count, 1,
                       "\(logged)")
        XCTAssertEqual(entry.uncommittedBytes, 0)

        // Failing again at the close: the report tells what is kept and what is not.
        store(2, of: entry, in: cache, bytes: bytes)
        XCTAssertEqual(rename(entry.directory, aside), 0)
        cache.descriptors.closeIdleDescriptors()
        let report = cache.closingReport()
        XCTAssertFalse(report.isClean)
        XCTAssertEqual(report.storedBytes, 3 * 65536)
        XCTAssertEqual(report.uncommittedBytes, 65536)
        XCTAssertEqual(report.keptBytes, 2 * 65536)
        XCTAssertNotNil(report.failure)
        let summary = try XCTUnwrap(report.summary)
        XCTAssertTrue(summary.hasPrefix("128.0 KiB of the 192.0 KiB this mount stored are kept; 64.0 KiB stored could "
                                        + "not be committed ("), summary)
        XCTAssertEqual(rename(aside, entry.directory), 0)
    }

    func testACleanCloseSaysSo() throws {
        let cache = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let entry = try cache.entry(for: metadata, blockSize: 65536)
        store(0, of: entry, in: cache, bytes: pseudoRandomBytes(count: 300_000))
        let report = cache.closingReport()
        XCTAssertTrue(report.isClean, "\(report)")
        XCTAssertNil(report.summary)
        XCTAssertEqual(report.keptBytes, 65536)
    }
}
