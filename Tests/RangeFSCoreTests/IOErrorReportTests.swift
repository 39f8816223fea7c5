import Foundation
import Logging
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 39: an `io` error's message, which the kernel cannot pass on, is logged once per distinct message (not
/// once per reply) and every `io` error is counted in `rangefs_io_errors_total`.
final class IOErrorReportTests: XCTestCase {
    let url = "http://origin/broken.bin"
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "io-errors")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// The counter of the file system under test (each mount has its own `Metrics`).
    var metrics: Metrics?
    var counted: UInt64 { metrics?.value("rangefs_io_errors_total") ?? 0 }

    func testABrokenFileReadInALoopLogsItsMessageOnceAndCountsEveryError() throws {
        let lines = LockedBox<[String]>([])
        let logger = Logger(label: "test") { _ in CommitHealthTests.CapturingHandler(lines: lines) }
        let origin = MemoryOrigin()
        origin.serve(url, bytes: pseudoRandomBytes(count: 200_000))
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, logger: logger)
        metrics = fileSystem.metrics
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "broken.bin")).inode
        let handle = try fileSystem.open(inode).get().handle
        origin.remove(url)  // every read of an uncached block now fails: the server answers 404
        let before = counted
        var messages = Set<String>()
        for _ in 0..<20 {
            let answer = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096))
            guard case .failure(let error) = answer, case .io(let message) = error else {
                return XCTFail("a read of a file its server no longer has was answered \(answer)")
            }
            messages.insert(message)
            fileSystem.noteFailure(error)  // as the FUSE adapter does before it replies with EIO
        }
        XCTAssertEqual(messages.count, 1, "the same failure each time: \(messages)")
        let logged = lines.withLock { $0 }.filter { $0.contains("EIO") }
        XCTAssertEqual(logged.count, 1, "\(logged)")
        XCTAssertTrue(logged.first?.contains(messages.first ?? "?") == true, "the line names the message: \(logged)")
        XCTAssertEqual(counted - before, 20, "every EIO is counted")

        // Another message is logged too, once; errors other than io are neither logged nor counted.
        fileSystem.noteFailure(.io("the cache file cannot be read"))
        fileSystem.noteFailure(.io("the cache file cannot be read"))
        fileSystem.noteFailure(.stale)
        fileSystem.noteFailure(.notFound)
        XCTAssertEqual(lines.withLock { $0 }.filter { $0.contains("EIO") }.count, 2)
        XCTAssertEqual(counted - before, 22)
        XCTAssertTrue(fileSystem.metrics.prometheusText.contains("# TYPE rangefs_io_errors_total counter\n"))
    }

    /// The messages remembered are bounded: past the limit the set starts again, and a message is logged anew.
    func testTheMessagesRememberedAreBounded() {
        let lines = LockedBox<[String]>([])
        let logger = Logger(label: "test") { _ in CommitHealthTests.CapturingHandler(lines: lines) }
        let report = IOErrorReport()
        let metrics = Metrics()
        for index in 0..<IOErrorReport.limit { report.note(.io("failure \(index)"), logger: logger, metrics: metrics) }
        report.note(.io("failure 0"), logger: logger, metrics: metrics)
        XCTAssertEqual(lines.withLock { $0.count }, IOErrorReport.limit, "each remembered message logged once")
        report.note(.io("one more"), logger: logger, metrics: metrics)  // the set is full: it starts again with this one
        report.note(.io("failure 0"), logger: logger, metrics: metrics)
        XCTAssertEqual(lines.withLock { $0.count }, IOErrorReport.limit + 2)
    }
}
