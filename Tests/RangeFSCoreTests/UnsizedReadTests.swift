import Foundation
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46, one pipeline: a file whose server sends no length is read through the file system by the block
/// pipeline alone. Past its entry's capacity a read waits for the stream to grow the entry (on the entry, no timer)
/// and the same transfer goes on into the grown entry; a stream that dies is taken up again, checking the blocks it
/// kept, also when it died with its entry full. Traffic is what the server sent (`bodyBytesDelivered`).
final class UnsizedReadTests: FolderTestCase {
    override class var folderPrefix: String { "unsized-read" }
    let url = "http://origin/grows.bin"
    let capacity = CacheHeader.unsizedCapacity
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = MemoryOrigin()
        origin.sendsNoLength = true
    }

    override func tearDown() {
        origin = nil
        super.tearDown()
    }

    /// A file system over `origin` serving `bytes` at `url` (under a cache cap of `maxBytes`), and the handle of an
    /// open of it.
    private func openFile(_ bytes: [UInt8], attempts: Int = 4,
                          maxBytes: Int? = nil) throws -> (RangeFS, handle: UInt64, inode: UInt64) {
        origin.serve(url, bytes: bytes)
        var policy = FetchPolicy()
        policy.attempts = attempts
        policy.retryDelay = .milliseconds(10)
        var storeSettings = StoreSettings()
        storeSettings.maxBytes = maxBytes
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, policy: policy,
                                                storeSettings: storeSettings)
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        XCTAssertFalse(item.metadata.sizeKnown)
        let opened = try fileSystem.open(item.inode).get()
        XCTAssertTrue(opened.directIO)
        return (fileSystem, opened.handle, item.inode)
    }

    /// Reads the whole file as `cp` does through direct I/O: 1 MiB at a time until an empty read.
    private func readToEnd(_ fileSystem: RangeFS, handle: UInt64) throws -> [UInt8] {
        try XCTUnwrap(fileSystem.readToEnd(handle: handle, count: 1 << 20, timeout: 120)).get()
    }

    /// A read of `count` bytes at `offset`, answered later: the test waits for `answered`.
    private func readLater(_ fileSystem: RangeFS, handle: UInt64, offset: UInt64, count: Int)
        -> (answered: XCTestExpectation, result: LockedBox<Result<[UInt8], FileSystemError>?>) {
        let answered = expectation(description: "the read at \(offset) was answered")
        let result = LockedBox<Result<[UInt8], FileSystemError>?>(nil)
        fileSystem.read(handle: handle, offset: offset, count: count) { reply in
            result.withLock { $0 = reply.map { $0.bytesForTesting() } }
            answered.fulfill()
        }
        return (answered, result)
    }

    func testAFileLargerThanTheCapacityIsReadWholeWithOneTransferAndEachByteOnce() throws {
        let bytes = pseudoRandomBytes(count: Int(capacity) + 3_000_000, seed: 11)
        let (fileSystem, handle, inode) = try openFile(bytes)
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, 0, "nothing streamed yet")
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
        XCTAssertEqual(origin.requests.count, 1, "one transfer, through the growth")
        XCTAssertEqual(origin.bodyBytesDelivered, UInt64(bytes.count), "the server sent each byte once")
        let item = try XCTUnwrap(fileSystem.catalog.item(inode: inode))
        XCTAssertTrue(item.metadata.sizeKnown)
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, UInt64(bytes.count))
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.state", of: inode).get(), "complete")
        fileSystem.release(handle)
    }

    /// The old pipeline's stream was not counted under `--cache-max-size` (a 64 MiB file left 65 MiB under a 16 MiB
    /// cap); the entry of unknown size is, through the growth and the settle.
    func testAFileWithoutALengthStaysUnderTheCacheCap() throws {
        let cap = 4 << 20
        let bytes = pseudoRandomBytes(count: Int(capacity) + 3_000_000, seed: 15)
        let (fileSystem, handle, _) = try openFile(bytes, maxBytes: cap)
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
        fileSystem.store.ledger.reserveRoom(for: 0)
        XCTAssertLessThanOrEqual(fileSystem.store.ledger.usedBytes, cap, "the cap holds")
        fileSystem.release(handle)
    }

    func testAReadPastTheCapacityWaitsForTheStreamAndAReadPastTheEndIsEmpty() throws {
        let bytes = pseudoRandomBytes(count: Int(capacity) + 500_000, seed: 12)
        origin.holdBodies()
        let (fileSystem, handle, _) = try openFile(bytes)
        let offset = capacity + 200_000
        let past = readLater(fileSystem, handle: handle, offset: offset, count: 65536)
        let beyond = readLater(fileSystem, handle: handle, offset: UInt64(bytes.count) + 10, count: 4096)
        XCTAssertNil(past.result.withLock { $0 }, "nothing is sent until the server goes on")
        origin.releaseBodies()
        wait(for: [past.answered, beyond.answered], timeout: 120)  // a deadline for a hang only
        XCTAssertEqual(try XCTUnwrap(past.result.withLock { $0 }).get(),
                       Array(bytes[Int(offset)..<(Int(offset) + 65536)]))
        XCTAssertEqual(try XCTUnwrap(beyond.result.withLock { $0 }).get(), [], "past the end: 0 bytes")
        let tail = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: UInt64(bytes.count) - 1000,
                                                              count: 65536)).get()
        XCTAssertEqual(tail, Array(bytes.suffix(1000)), "a read across the end is short")
        XCTAssertEqual(origin.requests.count, 1)
        fileSystem.release(handle)
    }

    func testAStreamThatDiesIsTakenUpAgainAndTheFileReadsRight() throws {
        let bytes = pseudoRandomBytes(count: Int(capacity) + 2_000_000, seed: 13)
        origin.dropAfterBytes = Int(capacity) + 1_000_000  // after the growth
        origin.dropsLeft = 1
        let (fileSystem, handle, _) = try openFile(bytes)
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
        XCTAssertEqual(origin.requests.count, 2, "the stream was asked again once")
        fileSystem.release(handle)
    }

    /// A stream that died once its entry was full, with no byte past it (a kill, or a server gone at that byte):
    /// the entry holds every block of its capacity and its size is still unknown. A read past the capacity streams
    /// again (its kept blocks checked against their CRCs) into a grown entry: never EIO for ever (an earlier attempt
    /// refused to stream a full entry).
    func testAFullEntryWhoseStreamDiedStreamsAgainPastItsCapacity() throws {
        let bytes = pseudoRandomBytes(count: Int(capacity) + 700_000, seed: 14)
        origin.serve(url, bytes: bytes)
        try {
            let store = try CacheStore(root: directory.path, logger: logger)
            let metadata = try origin.probeAll([url])[0].get()
            let entry = try store.entry(for: metadata, blockSize: 65536)
            for index in 0..<entry.blockCount {
                _ = Array(bytes[(index * 65536)..<((index + 1) * 65536)]).withUnsafeBytes {
                    entry.store(block: index, bytes: $0)
                }
            }
            _ = try entry.commit()
            XCTAssertTrue(entry.isComplete, "every block of the capacity is here")
            store.close()
        }()
        let (fileSystem, handle, _) = try openFile(bytes)
        let offset = Int(capacity) + 100_000
        XCTAssertEqual(try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: 4096,
                                                                  timeout: 120)).get(),
                       Array(bytes[offset..<(offset + 4096)]))
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
        XCTAssertEqual(origin.requests.count, 1, "one stream past the kept blocks")
        fileSystem.release(handle)
    }
}
