import Foundation
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// A server that ignores Range can only be asked for a file from its first byte: a stream after a restart (a kill,
/// a dropped connection) brings again the blocks the cache kept. It must check them, not skip them blindly: a
/// server without an ETag whose file changed within the same second, at the same length, tells the change by its
/// bytes alone. The stream of a file without a length always did (UnsizedDownload compared what it kept); the
/// block pipeline's whole-file stream skipped present blocks unchecked, so the cache mixed two versions (issue 46,
/// "one pipeline": both kinds of file are to take this one path).
final class RangelessResumeTests: FolderTestCase {
    override class var folderPrefix: String { "rangeless-resume" }
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 3_000_000, seed: 11)
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = MemoryOrigin()
        origin.ignoresRange = true
        origin.serve(url, bytes: bytes, etag: "")  // no ETag; the date stays: only the bytes tell a change
    }

    func makeFileSystem(attempts: Int = 4, retryDelay: Duration = .milliseconds(10)) throws -> RangeFS {
        var policy = FetchPolicy()
        policy.attempts = attempts
        policy.retryDelay = retryDelay
        return try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, policy: policy)
    }

    /// Streams the file in a RangeFS of its own whose connection drops at 1,000,000 bytes, commits what it
    /// stored, and returns when that RangeFS is gone, as a restart finds the cache.
    func streamUntilTheConnectionDrops() throws {
        let released = try withFileSystem({ try makeFileSystem(attempts: 1, retryDelay: .seconds(1)) }) { fileSystem in
            // After the mount's probe. The first read's Range request is answered with the whole file and ends
            // at its head (the server ignores Range), then the stream from byte 0 is the one cut; its retry finds
            // the server down, as a restart would find it gone.
            origin.dropAfterBytes = 1_000_000
            origin.dropsLeft = 2
            let item = try XCTUnwrap(fileSystem.catalog.items.first)
            let handle = try fileSystem.open(item.inode).get().handle
            XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 65536, timeout: 60)?.get(),
                           Array(bytes[..<65536]))
            origin.isDown = true
            guard case .failure = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 2_000_000,
                                                                              count: 4096, timeout: 60))
            else { return XCTFail("the stream broke at 1,000,000 bytes") }
            fileSystem.release(handle)
        }
        XCTAssertTrue(released, "the first mount's store was released")
        origin.isDown = false
    }

    /// Each attempt of a whole-file stream starts again at byte 0, so the blocks it passes are no progress: a
    /// server that drops every stream at the same byte made each attempt look like progress and the stream was
    /// tried again for ever, its reader never answered. The policy's attempts now bound it.
    func testAStreamCutAtTheSameByteEveryTimeFailsItsReaderAfterThePolicysAttempts() throws {
        let fileSystem = try makeFileSystem(attempts: 3)
        origin.dropAfterBytes = 1_000_000
        origin.dropsLeft = 1_000
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        let result = fileSystem.readSynchronously(handle: handle, offset: 2_000_000, count: 4096, timeout: 30)
        guard case .failure = try XCTUnwrap(result, "the read never answered (\(origin.requests.count) requests)") else {
            return XCTFail("the server never sends byte 2,000,000 (\(origin.requests.count) requests: \(origin.requests.prefix(8).map { $0.range.map { "\($0)" } ?? "whole" }))")
        }
        XCTAssertLessThanOrEqual(origin.requests.count, 6, "the mount's probe, the read's request, three attempts")
        fileSystem.release(handle)
    }

    func testAStreamAfterARestartChecksTheBlocksItKeptAndAChangeFailsTheOldVersion() throws {
        try streamUntilTheConnectionDrops()
        var changed = bytes
        for index in 600_000..<700_000 { changed[index] ^= 0xFF }
        origin.serve(url, bytes: changed, etag: "")
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let kept = try XCTUnwrap(fileSystem.store.storedEntry(for: url)?.present.setCount)
        XCTAssertGreaterThan(kept, 1, "the restart finds blocks of the first stream")
        let old = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: old, offset: 0, count: 4096, timeout: 60)?.get(),
                       Array(bytes[..<4096]), "a kept block is served from the cache")
        // Reading on makes the stream pass the changed blocks; the handle that read the old bytes gets ESTALE.
        let later = try XCTUnwrap(fileSystem.readSynchronously(handle: old, offset: 2_000_000, count: 4096, timeout: 60))
        var got = "an error"
        if case .success(let piece) = later { got = piece[...] == changed[2_000_000..<2_004_096] ? "new bytes" : "old bytes" }
        XCTAssertTrue(later == .failure(.stale), "the old version's handle learns of the change; it read \(got)")
        fileSystem.release(old)
        let fresh = try fileSystem.open(item.inode).get().handle
        let copy = try readToEnd(fileSystem, handle: fresh)
        XCTAssertEqual(copy.count, changed.count)
        let firstDifference: Int? = zip(copy, changed).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        XCTAssertNil(firstDifference, "a new handle reads the new version only")
        fileSystem.release(fresh)
    }

    func testAnUnchangedFileIsCompletedByTheStreamAfterARestart() throws {
        try streamUntilTheConnectionDrops()
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        let copy = try readToEnd(fileSystem, handle: handle)
        XCTAssertTrue(copy == bytes, "the kept blocks and the streamed rest make the file")
        fileSystem.release(handle)
    }

    /// A fill of a file whose server ignores Range is one stream: the file's fill, asked for once its stream stopped
    /// (its reader closed it, then a `--prefetch` policy, `rangefs add` or a digest's refetch asked for the rest),
    /// claimed a run, found the file rangeless and gave the run back; nothing started the stream, so the file was
    /// never completed, and that fill round ended there for every other file too. The stream a file without a
    /// length has is completed by its fill the same way (UnsizedDownloadTests), which the one pipeline keeps.
    func testAFillOfAFileWhoseStreamStoppedStartsAnotherStream() throws {
        // 16 KiB every 50 ms: the 3 MB would take about 9 s, far past the stream's check for readers (every second),
        // so a loaded machine's delays cannot let it finish first.
        origin.chunkDelay = 0.05
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096, timeout: 60)?.get(),
                       Array(bytes[..<4096]))
        fileSystem.release(handle)
        // The stream stops once it finds nobody reading (it asks every second).
        var delivered = origin.bodyBytesDelivered
        var deadline = Date().addingTimeInterval(30)
        repeat {
            usleep(1_500_000)
            let now = origin.bodyBytesDelivered
            if now == delivered { break }
            delivered = now
        } while Date() < deadline
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        XCTAssertTrue(entry.isRangeless)
        XCTAssertFalse(entry.isComplete, "the stream stopped before the end (\(delivered) bytes sent)")
        origin.chunkDelay = 0  // the fill's stream at full speed
        fileSystem.scheduler.fill(entry, url: url)
        deadline = Date().addingTimeInterval(60)
        while !entry.isComplete && Date() < deadline { usleep(20_000) }
        XCTAssertTrue(entry.isComplete, "the fill completed the file (\(origin.requests.count) requests)")
    }

    /// The file read through `handle` 128 KiB at a time until an empty read.
    func readToEnd(_ fileSystem: RangeFS, handle: UInt64) throws -> [UInt8] {
        try XCTUnwrap(fileSystem.readToEnd(handle: handle)).get()
    }
}
