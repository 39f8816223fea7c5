import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 24: the cache's descriptors are bounded whatever the number of files, and running out of descriptors
/// never reaches a caller.
final class DescriptorPoolTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "pool")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// Descriptors this process has open now.
    func openDescriptors() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count
    }

    func testTwoHundredFilesThroughAPoolOfFourKeepTheirBytesAndAtMostFourDescriptors() throws {
        let pool = DescriptorPool(capacity: 4)
        let before = openDescriptors()
        let files = (0..<200).map { pool.file(path: directory.path + "/f\($0)", flags: O_RDWR | O_CREAT) }
        XCTAssertEqual(pool.openCount, 0, "a pooled file holds no descriptor until it is used")
        // Interleaved: each round writes to every file, so every call meets a closed descriptor.
        for round in 0..<3 {
            for (index, file) in files.enumerated() {
                try file.write(Array("\(index):\(round);".utf8), at: UInt64(round * 16))
                XCTAssertLessThanOrEqual(pool.openCount, 4)
            }
        }
        XCTAssertLessThanOrEqual(openDescriptors() - before, 4)
        for (index, file) in files.enumerated() {
            for round in 0..<3 {
                let expected = Array("\(index):\(round);".utf8)
                XCTAssertEqual(try file.read(at: UInt64(round * 16), count: expected.count), expected)
            }
            try file.synchronizeData()
            XCTAssertEqual(try file.status().size, UInt64(32 + "\(index):2;".utf8.count))
        }
        XCTAssertLessThanOrEqual(pool.openCount, 4)
    }

    func testReleasingAFileClosesItsDescriptor() throws {
        let pool = DescriptorPool(capacity: 8)
        let before = openDescriptors()
        do {
            let file = pool.file(path: directory.path + "/one", flags: O_RDWR | O_CREAT)
            try file.write([1, 2, 3], at: 0)
            XCTAssertEqual(pool.openCount, 1)
            XCTAssertEqual(openDescriptors(), before + 1)
        }
        XCTAssertEqual(pool.openCount, 0)
        XCTAssertEqual(openDescriptors(), before)
    }

    func testALeaseKeepsItsDescriptorOpenWhileThePoolMakesRoom() throws {
        let pool = DescriptorPool(capacity: 2)
        let leased = pool.file(path: directory.path + "/leased", flags: O_RDWR | O_CREAT)
        try leased.write(Array("kept open".utf8), at: 0)
        let lease = try leased.lease()
        for index in 0..<20 {
            try pool.file(path: directory.path + "/other\(index)", flags: O_RDWR | O_CREAT).write([1], at: 0)
        }
        var buffer = [UInt8](repeating: 0, count: 9)
        XCTAssertEqual(pread(lease.descriptor, &buffer, 9, 0), 9, "the leased descriptor was not closed")
        XCTAssertEqual(buffer, Array("kept open".utf8))
    }

    /// Under a process limit of (what is open now + 16), a pool that believes it may hold 64 meets EMFILE: it
    /// closes its own idle descriptors and goes on, and no call fails.
    func testRunningOutOfDescriptorsClosesIdleOnesInsteadOfFailing() throws {
        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &saved), 0)
        var tight = saved
        tight.rlim_cur = rlim_t(openDescriptors() + 16)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &tight), 0)
        defer { _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &saved) }
        let pool = DescriptorPool(capacity: 64)
        let files = (0..<40).map { pool.file(path: directory.path + "/f\($0)", flags: O_RDWR | O_CREAT) }
        for (index, file) in files.enumerated() { try file.write([UInt8(index)], at: 0) }
        for (index, file) in files.enumerated() { XCTAssertEqual(try file.read(at: 0, count: 1), [UInt8(index)]) }
        XCTAssertGreaterThan(pool.exhaustionCount, 0, "the limit was met")
        XCTAssertLessThanOrEqual(pool.openCount, 20, "no more than the limit leaves room for")
    }

    /// A store whose pool holds 16 descriptors serves 300 entries: every block stored is read back and
    /// committed, and the store never holds more than 16 descriptors for them.
    func testAStoreOfThreeHundredEntriesUnderSixteenDescriptors() throws {
        var settings = StoreSettings()
        settings.openFiles = 16
        let before = openDescriptors()
        let store = try CacheStore(root: directory.path, settings: settings, logger: Logger(label: "test"))
        var entries: [(CacheEntry, [UInt8])] = []
        for index in 0..<300 {
            let bytes = pseudoRandomBytes(count: 5000 + index, seed: UInt64(index))
            let metadata = RemoteMetadata(url: "http://origin/f\(index).bin", size: UInt64(bytes.count),
                                          etag: "\"\(index)\"", lastModified: "")
            let entry = try store.entry(for: metadata, blockSize: 65536)
            _ = bytes.withUnsafeBytes { entry.store(block: 0, bytes: $0) }
            entries.append((entry, bytes))
            XCTAssertLessThanOrEqual(store.descriptors.openCount, 16)
        }
        for (entry, bytes) in entries {
            XCTAssertEqual(try entry.readPresent(0..<UInt64(bytes.count)), bytes)
            XCTAssertTrue(try entry.commit())
        }
        // The store's own lock file, plus at most the pool.
        XCTAssertLessThanOrEqual(openDescriptors() - before, 17)
        XCTAssertEqual(store.descriptors.exhaustionCount, 0)
    }
}
