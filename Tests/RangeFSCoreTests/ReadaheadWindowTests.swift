@testable import RangeFSFetch
import XCTest

final class ReadaheadWindowTests: XCTestCase {
    let kibibyte: UInt64 = 1 << 10
    let mebibyte: UInt64 = 1 << 20

    /// A sequential reader (a copy) still gets the whole window: modest at first, growing fast past
    /// `growthStart` but never past what the stream read, then held at the cap.
    func testSequentialReadsGrowTheWindowToItsCap() {
        var window = ReadaheadWindow(minimum: 256 << 10, maximum: 8 << 20, growthStart: 3 << 20)
        var windows: [UInt64] = []
        for index in 0..<16 { windows.append(window.observe(offset: UInt64(index) * mebibyte, count: 1 << 20)) }
        XCTAssertEqual(Array(windows.prefix(4)), [0, 0, 256 * kibibyte, 256 * kibibyte],
                       "a modest window after two sequential reads, until the stream passes 3 MiB")
        XCTAssertEqual(windows[4], 256 * kibibyte + 4 * mebibyte, "then by four bytes per byte read past 3 MiB")
        XCTAssertEqual(windows[5], 256 * kibibyte + 5 * mebibyte, "but never past what the stream read")
        XCTAssertEqual(windows.suffix(5), Array(repeating: 8 * mebibyte, count: 5), "up to its cap, where it stays")
        XCTAssertEqual(windows, windows.sorted(), "it never shrinks while the reader goes on")
    }

    /// The bound behind `head -c 1M` fetching little: whatever the size of the reads, after a stream of N bytes
    /// the window is at most N plus the modest start, and never more than the cap.
    func testTheWindowIsNeverMoreThanWhatTheStreamReadPlusTheModestStart() {
        for readSize: UInt64 in [4 << 10, 128 << 10, 1 << 20] {
            var window = ReadaheadWindow(maximum: 32 << 20)
            var offset: UInt64 = 0
            var tooFar: [String] = []
            while offset < 64 << 20 {
                let ahead = window.observe(offset: offset, count: Int(readSize))
                if ahead > offset + window.minimum || ahead > 32 << 20 { tooFar.append("\(ahead) at \(offset)") }
                offset += readSize
            }
            XCTAssertEqual(tooFar.prefix(3), [], "windows past what was read, with reads of \(readSize) bytes")
            XCTAssertEqual(window.window, 32 << 20, "a long sequential read of \(readSize)-byte reads reaches the cap")
        }
    }

    /// What the kernel sent for `head -c 1000000` with the mount's 1 MiB kernel readahead (traced on a real
    /// mount): its readahead ramps up and runs about 2 MB past the program. The window stays modest throughout, so
    /// the file system fetches about 3 MiB in all, not 35 as when the window doubled per read.
    func testTheKernelsReadsForAOneMegabyteHeadKeepAModestWindow() {
        let reads: [(offset: UInt64, count: Int)] = [
            (0, 32768), (32768, 131_072), (163_840, 262_144), (425_984, 524_288), (950_272, 1_044_480),
            (1_994_752, 4096), (1_998_848, 1_044_480), (3_043_328, 4096),
        ]
        var window = ReadaheadWindow()
        var furthest: UInt64 = 0
        for read in reads {
            let ahead = window.observe(offset: read.offset, count: read.count)
            furthest = max(furthest, read.offset + UInt64(read.count) + ahead)
        }
        XCTAssertLessThanOrEqual(window.window, window.minimum)
        XCTAssertLessThan(furthest, 7 << 19, "fetched up to \(furthest): well under 4 MiB")
    }

    func testSlightlyReorderedReadsStaySequential() {
        var window = ReadaheadWindow()
        _ = window.observe(offset: 0, count: 131_072)
        _ = window.observe(offset: 262_144, count: 131_072)
        XCTAssertGreaterThan(window.observe(offset: 131_072, count: 131_072), 0)
    }

    /// Two daemon threads can take two of the kernel's 1 MiB READs in the wrong order. That must not restart the
    /// stream: under the proportional rule a restart would cost the window all its growth.
    func testTwoLargeReadsTakenInTheWrongOrderKeepTheStreamAndItsWindow() {
        var window = ReadaheadWindow(maximum: 32 << 20)
        let offset = readMebibytes(upTo: 20 * mebibyte, into: &window)
        let grown = window.window
        XCTAssertGreaterThan(grown, 16 * mebibyte)
        XCTAssertGreaterThanOrEqual(window.observe(offset: offset + mebibyte, count: 1 << 20), grown)
        XCTAssertGreaterThanOrEqual(window.observe(offset: offset, count: 1 << 20), grown)
        XCTAssertEqual(window.streamLength, 22 * mebibyte)
    }

    func testRandomReadsNeverReadAhead() {
        var window = ReadaheadWindow()
        for offset: UInt64 in [5 << 20, 100 << 20, 3 << 20, 200 << 20, 40 << 20] {
            XCTAssertEqual(window.observe(offset: offset, count: 4096), 0)
        }
    }

    /// A jump elsewhere (a prober seeking to an index at the end) starts a new stream, which has to earn its
    /// window again.
    func testAJumpStartsAStreamWithNoWindow() {
        var window = ReadaheadWindow(maximum: 32 << 20)
        _ = readMebibytes(upTo: 40 * mebibyte, into: &window)
        XCTAssertEqual(window.window, 32 << 20)
        XCTAssertEqual(window.observe(offset: 400 * mebibyte, count: 131_072), 0)
        XCTAssertEqual(window.observe(offset: 400 * mebibyte + 131_072, count: 131_072), 0)
        XCTAssertEqual(window.observe(offset: 400 * mebibyte + 262_144, count: 131_072), window.minimum)
    }

    /// Reads from byte 0 in 1 MiB reads up to `end`, as the kernel does for a copy; returns where it got to.
    private func readMebibytes(upTo end: UInt64, into window: inout ReadaheadWindow) -> UInt64 {
        var offset: UInt64 = 0
        while offset < end {
            _ = window.observe(offset: offset, count: 1 << 20)
            offset += mebibyte
        }
        return offset
    }
}
