@testable import RangeFSCache
import Dispatch
import Foundation
import Glibc
import Logging
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Readahead planning per handle, and a read that is served again after its memory-held block was dropped.
final class ReadPlannerTests: XCTestCase {
    let mebibyte: UInt64 = 1 << 20

    func planner() -> ReadPlanner {
        ReadPlanner(window: ReadaheadWindow(minimum: 256 << 10, maximum: 8 << 20, growthStart: 3 << 20))
    }

    func testRandomReadsPlanNoReadahead() {
        var reads = planner()
        for offset: UInt64 in [50 * mebibyte, 3 * mebibyte, 90 * mebibyte] {
            let plan = reads.plan(offset: offset, count: 4096, fileSize: 100 * mebibyte)
            XCTAssertEqual(plan.range, offset..<(offset + 4096))
            XCTAssertNil(plan.networkAhead)
            XCTAssertNil(plan.diskAhead)
        }
        XCTAssertEqual(reads.readaheadWindow, 0)
    }

    func testASequentialReaderFetchesAheadInStepsOfHalfAWindowAndNothingTwice() {
        var reads = planner()
        var fetched: [Range<UInt64>] = []
        var windows: [UInt64] = []
        let readCount = 120
        for index in 0..<readCount {
            let offset = UInt64(index) * 128 << 10
            let plan = reads.plan(offset: offset, count: 128 << 10, fileSize: 100 * mebibyte)
            if let ahead = plan.networkAhead { fetched.append(ahead) }
            windows.append(reads.readaheadWindow)
        }
        XCTAssertEqual(Array(windows.prefix(3)), [0, 0, 256 << 10], "the window starts modest after two sequential reads")
        XCTAssertEqual(windows[24], 256 << 10, "and stays so while the stream is within its first 3 MiB")
        XCTAssertGreaterThan(windows[30], windows[24], "then it grows as the reader goes on")
        XCTAssertEqual(windows.last, 8 * mebibyte, "up to its cap")
        XCTAssertEqual(windows, windows.sorted(), "never shrinking while the reader goes on")
        XCTAssertLessThan(fetched.count, readCount / 3, "few requests for \(readCount) reads: \(fetched)")
        for (earlier, later) in zip(fetched, fetched.dropFirst()) {
            XCTAssertEqual(earlier.upperBound, later.lowerBound, "each step starts where the last ended")
        }
        XCTAssertEqual(fetched.first?.lowerBound, 384 << 10, "readahead starts past the read that started it")
        for (index, ahead) in fetched.enumerated() {
            XCTAssertLessThanOrEqual(ahead.upperBound, 2 * ahead.lowerBound + (256 << 10),
                                     "step \(index) fetches no further ahead than the reader read, plus 256 KiB")
        }
    }

    func testReadsAreClippedAtTheEndOfTheFile() {
        var reads = planner()
        XCTAssertEqual(reads.plan(offset: 900, count: 200, fileSize: 1000).range, 900..<1000)
        XCTAssertTrue(reads.plan(offset: 2000, count: 200, fileSize: 1000).range.isEmpty)
    }

    /// A read's block can be dropped between its arrival and its reply: kept in memory because it could not be
    /// written, then dropped to stay within the memory limit. The read is then served again. It must not be
    /// planned again: one kernel READ that moved the readahead window twice made it grow too fast.
    func testAReadServedAgainAfterItsBlockWasDroppedMovesTheWindowOnce() throws {
        let url = "http://origin/data.bin"
        let bytes = pseudoRandomBytes(count: 8_000_000)
        let directory = try TemporaryDirectory(prefix: "planner")
        let origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        var settings = StoreSettings()
        settings.memoryBlockLimit = 0  // an unwritable block is dropped as soon as the writer gives up on it
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                                                storeSettings: settings)
        let item = try XCTUnwrap(fileSystem.catalog.item(named: "data.bin"))
        let handle = try fileSystem.open(item.inode).get().handle
        // Every data write now fails (EFBIG), as on a full disk: blocks are served from memory only.
        var saved = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        signal(SIGXFSZ, SIG_IGN)
        var tiny = rlimit(rlim_cur: 4096, rlim_max: saved.rlim_max)
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &tiny)
        defer {
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
            signal(SIGXFSZ, SIG_DFL)
        }

        var expected = ReadPlanner(window: ReadaheadWindow(maximum: 32 << 20))  // as OpenHandles makes it
        // Three reads of 1 MiB, as the kernel sends: the stream then reaches 3 MiB, where the window starts to
        // grow, so planning the next read twice would widen the window (1.75 MiB instead of 256 KiB).
        func readAndExpect(_ index: Int) {
            let (offset, count) = (index << 20, 1 << 20)
            let result = fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: count)
            XCTAssertEqual(try result?.get(), Array(bytes[offset..<(offset + count)]), "read \(index)")
            _ = expected.plan(offset: UInt64(offset), count: count, fileSize: UInt64(bytes.count))
        }
        for index in 0..<3 { readAndExpect(index) }

        // The next read's reply waits until the writer has failed on its blocks and dropped them: its first
        // answer finds them gone, and the read is served again. It starts 256 KiB past the stream's end (still
        // sequential, as a READ overtaken by another), where the 256 KiB the third read fetched ahead end: its
        // blocks are fetched for it alone.
        let entry = try fileSystem.entry(for: item)
        let replies = fileSystem.store.pipeline.replyQueue
        replies.suspend()
        let (offset, count) = ((3 << 20) + (256 << 10), 128 << 10)
        let blocks = entry.blocks(covering: UInt64(offset)..<UInt64(offset + count))
        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<[UInt8]?>(nil)
        fileSystem.read(handle: handle, offset: UInt64(offset), count: count) { result in
            answer.withLock { $0 = try? result.get().bytesForTesting() }
            done.signal()
        }
        _ = expected.plan(offset: UInt64(offset), count: count, fileSize: UInt64(bytes.count))
        func arrivedAndDropped() -> Bool {
            entry.state.withLock { state in
                blocks.allSatisfy { !state.blocks.inFlight.contains($0) && !state.blocks.isReadable($0) }
            }
        }
        let deadline = Date().addingTimeInterval(10)
        while !arrivedAndDropped() && Date() < deadline { usleep(2000) }
        XCTAssertTrue(arrivedAndDropped(), "the read's blocks arrived, failed to be written and were dropped")
        replies.resume()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success, "the read was never answered")
        XCTAssertEqual(answer.withLock { $0 }, Array(bytes[offset..<(offset + count)]))
        let firstByte = entry.byteRange(of: blocks).lowerBound
        // Counted over the whole test, not from the resume on: on a loaded machine the refetch may start before
        // the count is taken (a CI run saw that).
        XCTAssertGreaterThanOrEqual(origin.requests.filter { $0.range?.contains(firstByte) ?? false }.count, 2,
                                    "the read was served again: its dropped block was fetched again")
        XCTAssertEqual(fileSystem.readaheadWindow(of: handle), expected.readaheadWindow,
                       "each READ moves the readahead window once, however often it is served")
    }
}
