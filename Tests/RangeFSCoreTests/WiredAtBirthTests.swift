import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSControl
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 39: everything the file system needs is given to it at its birth. The kernel is told through the
/// notifier it was made with, each mount counts in the metrics it was given, the store reports through the events
/// it was made with, and the passthrough capability is the mount's own.
final class WiredAtBirthTests: XCTestCase {
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 300_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "wired")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
    }

    override func tearDown() {
        origin = nil
        directory = nil
        super.tearDown()
    }

    func inode(of fileSystem: RangeFS) throws -> UInt64 {
        try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
    }

    /// `rangefs rm` makes the kernel forget the name before its answer; a remote change makes it drop the file's
    /// pages, the part no ESTALE reply holds before those replies, and the whole file after them.
    func testTheKernelIsToldThroughTheNotifierTheFileSystemWasMadeWith() throws {
        let kernel = KernelRecorder()
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path + "/a",
                                                kernel: kernel)
        let inode = try inode(of: fileSystem)
        let handle = try fileSystem.open(inode).get().handle
        origin.lastModified = "Mon, 07 Nov 1994 08:49:37 GMT"
        origin.serve(url, bytes: bytes, etag: "\"v2\"")  // If-Range no longer matches: a 200 arrives
        XCTAssertEqual(fileSystem.readSynchronously(handle: handle, offset: 0, count: 100), .failure(.stale))
        XCTAssertTrue(kernel.notices.contains(.pages(inode, 4096..<UInt64.max)),
                      "the pages no ESTALE reply holds are dropped before the reply: \(kernel.notices)")
        let afterChange = kernel.wait { $0 == .pages(inode, 0..<UInt64.max) }
        XCTAssertTrue(afterChange.contains(.pages(inode, 0..<UInt64.max)), "then the whole file: \(afterChange)")
        fileSystem.release(handle)

        let control = ControlService(fileSystem: fileSystem)
        XCTAssertTrue(control.handle(ControlRequest(command: .rm, name: "data.bin")).ok)
        XCTAssertEqual(kernel.notices.last, .name("data.bin", parent: Catalog.rootInode),
                       "the name is forgotten before rm answers")
    }

    /// Two mounts in one process count apart: a read through one shows in its metrics only, its READ and the
    /// bytes its transfer fetched (counted by the sink, handed over by the scheduler it was given).
    func testEachFileSystemCountsInTheMetricsItWasGiven() throws {
        let counted = Metrics(), other = Metrics()
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path + "/a",
                                                metrics: counted)
        let idle = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path + "/b",
                                          metrics: other)
        XCTAssertTrue(fileSystem.metrics === counted && idle.metrics === other)
        let handle = try fileSystem.open(try inode(of: fileSystem)).get().handle
        defer { fileSystem.release(handle) }
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 100)?.get(),
                       Array(bytes[0..<100]))
        let fetched: KeyValuePairs<String, String> = ["source": URLOrigin.of(url)!, "role": "origin"]
        // The transfer hands its count over when it ends, which may be just after the reply.
        let deadline = Date().addingTimeInterval(30)
        while counted.value("rangefs_fetched_bytes_total", labels: fetched) == 0 && Date() < deadline {
            usleep(5_000)
        }
        XCTAssertEqual(counted.value("rangefs_reads_total", labels: ["result": "miss"]), 1)
        XCTAssertGreaterThanOrEqual(counted.value("rangefs_fetched_bytes_total", labels: fetched), 65536)
        XCTAssertEqual(other.value("rangefs_reads_total", labels: ["result": "miss"]), 0)
        XCTAssertEqual(other.value("rangefs_fetched_bytes_total", labels: fetched), 0)
        XCTAssertTrue(ControlService(fileSystem: fileSystem).handle(ControlRequest(command: .metrics)).message?
            .contains("rangefs_reads_total{result=\"miss\"} 1") ?? false, "the control channel serves the mount's own")
    }

    /// The store reports into the queue it was made with once, when a commit makes a file's whole data durable.
    func testTheStoreReportsACompleteFileThroughTheQueueItWasMadeWith() throws {
        let reports = EventQueue<EntryEvent>()
        defer { reports.close() }
        let store = try CacheStore(root: directory.path + "/store", reports: reports, logger: Logger(label: "test"))
        defer { store.close() }
        let metadata = RemoteMetadata(url: url, size: 131_072, etag: "\"1\"", lastModified: "")
        let entry = try store.entry(for: metadata, blockSize: 65536)
        let range = entry.byteRange(of: 0..<1)
        _ = bytes[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes { entry.store(block: 0, bytes: $0) }
        store.commitAll()
        let second = entry.byteRange(of: 1..<2)
        _ = bytes[Int(second.lowerBound)..<Int(second.upperBound)].withUnsafeBytes { entry.store(block: 1, bytes: $0) }
        store.commitAll()
        store.commitAll()
        // A marker after the commits: the queue is in order, so whatever the store sent comes before it.
        reports.send(.remoteChanged(entry))
        var told: [String] = []
        while let event = reports.next() {
            if case .remoteChanged = event { break }
            if case .completed(let completed) = event { told.append(completed.header.url) }
        }
        XCTAssertEqual(told, [url], "told once, when the whole file became durable (half a file is not complete)")
    }

    /// The passthrough capability is the value the mount made and gave both to the file system and to the FUSE
    /// adapter: what one side settles, the other sees.
    func testThePassthroughCapabilityIsTheOneTheMountGave() throws {
        let capability = LockedBox(PassthroughMode.on)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path + "/a",
                                                passthrough: capability)
        let status = ControlService(fileSystem: fileSystem).handle(ControlRequest(command: .status))
        XCTAssertEqual(status.passthrough, PassthroughMode.on.description)
        fileSystem.passthroughFailed(0, disable: "the kernel refused a backing file")
        XCTAssertEqual(capability.withLock { $0 }, .off("the kernel refused a backing file"))
    }
}
