import Foundation
@testable import RangeFSCache
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// The block pipeline's stream of a file whose server sends no length (issue 46, one pipeline): an entry of
/// unknown size is streamed whole from byte 0 by a `BlockSink`, and at the body's end the store settles it at the
/// size found; a body longer than the entry's capacity gets an entry with more room, into which the same stream goes
/// on. These tests drive the store and the scheduler directly (UnsizedReadTests reads through the file system),
/// with a server that ignores Range and sends no length (chunked).
final class UnsizedStreamTests: FolderTestCase {
    override class var folderPrefix: String { "unsized-stream" }
    let url = "http://origin/stream.bin"

    /// A file system over a server that ignores Range and sends no length for `bytes`, its entry of unknown size
    /// opened, and the store's entry of `url` once it is of a known size (nil after 60 s).
    private func streamWithoutLength(_ bytes: [UInt8], grow: Bool = false, kernel: any KernelNotifier = NoKernel(),
                                     check: (RangeFS) throws -> Void = { _ in }) throws
        -> (origin: MemoryOrigin, streamed: CacheEntry, settled: CacheEntry?) {
        let origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        origin.ignoresRange = true
        origin.sendsNoLength = true
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, kernel: kernel)
        let item = try XCTUnwrap(fileSystem.catalog.item(named: "stream.bin"))
        XCTAssertFalse(item.metadata.sizeKnown, "the probe found no length")
        let entry = try fileSystem.store.entry(for: item.metadata, blockSize: fileSystem.settings.blockSize)
        XCTAssertTrue(entry.isRangeless, "an entry of unknown size is streamed whole")
        let requestsBefore = origin.requests.count
        fileSystem.scheduler.fill(entry, url: url)
        let deadline = Date().addingTimeInterval(60)  // a deadline for a hang only: it ends at the settle
        var grown = false
        while Date() < deadline {
            if let open = fileSystem.store.openEntry(for: url), open !== entry {
                if open.header.sizeKnown {
                    XCTAssertEqual(origin.requests.count - requestsBefore, 1, "one stream, whatever the growth")
                    try check(fileSystem)
                    return (origin, entry, open)
                }
                if grow, !grown {
                    grown = true
                    XCTAssertFalse(open.header.sizeKnown, "grown, still of unknown size")
                    XCTAssertEqual(open.header.size, CacheHeader.unsizedCapacity * CacheStore.capacityGrowth)
                }
            }
            usleep(10_000)
        }
        return (origin, entry, nil)
    }

    func testAStreamWithoutALengthSettlesItsEntryAtTheSizeItFound() throws {
        let bytes = pseudoRandomBytes(count: 3_000_000, seed: 5)
        let (_, streamed, settled) = try streamWithoutLength(bytes)
        let entry = try XCTUnwrap(settled, "the entry was never settled")
        // The old entry goes stale just after the new one is in the store's table (its waiters are answered once the
        // store's locks are let go): a busy machine shows the moment between. A deadline for a hang only.
        let deadline = Date().addingTimeInterval(60)
        while !streamed.isStale && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(streamed.isStale, "the entry of the capacity serves nothing more")
        XCTAssertEqual(entry.header.size, 3_000_000)
        XCTAssertFalse(entry.isSmall)
        XCTAssertTrue(entry.isComplete)
        XCTAssertEqual(entry.reply(for: 0..<3_000_000)?.bytesForTesting(), bytes)
    }

    func testASmallFileWithoutALengthSettlesAsOneSmallFile() throws {
        let bytes = pseudoRandomBytes(count: 100_000, seed: 6)
        let entry = try XCTUnwrap(try streamWithoutLength(bytes).settled, "the entry was never settled")
        XCTAssertEqual(entry.header.size, 100_000)
        XCTAssertTrue(entry.isSmall)
        XCTAssertTrue(entry.isComplete)
        XCTAssertEqual(entry.reply(for: 0..<100_000)?.bytesForTesting(), bytes)
    }

    /// Issue 46: a body that outgrew the capacity was cut and streamed again from byte 0 (a 64 MiB file cost
    /// 84.5 MiB). The stream pauses while the store grows the entry, then goes on into it: every byte once.
    func testABodyLongerThanTheCapacityGoesOnIntoMoreRoomWithoutStartingOver() throws {
        let count = Int(CacheHeader.unsizedCapacity) + 1_000_000
        let bytes = pseudoRandomBytes(count: count, seed: 8)
        let (origin, _, settled) = try streamWithoutLength(bytes, grow: true)
        let entry = try XCTUnwrap(settled, "the entry was never settled")
        XCTAssertEqual(entry.header.size, UInt64(count))
        XCTAssertTrue(entry.isComplete)
        XCTAssertEqual(entry.reply(for: 0..<UInt64(count))?.bytesForTesting(), bytes)
        XCTAssertEqual(origin.bodyBytesDelivered, UInt64(count), "the server sent each byte once")
    }

    func testTheCatalogAndTheKernelLearnTheSizeAtTheStreamsEnd() throws {
        let bytes = pseudoRandomBytes(count: 300_000, seed: 9)
        let kernel = KernelRecorder()
        let (_, _, settled) = try streamWithoutLength(bytes, kernel: kernel) { fileSystem in
            let item = try XCTUnwrap(fileSystem.catalog.item(named: "stream.bin"))
            // The catalog learns the size right after the store let the new entry in: waited for, briefly.
            let deadline = Date().addingTimeInterval(30)
            var metadata = item.metadata
            while !metadata.sizeKnown, Date() < deadline {
                usleep(5_000)
                metadata = try XCTUnwrap(fileSystem.catalog.item(named: "stream.bin")).metadata
            }
            XCTAssertTrue(metadata.sizeKnown, "the catalog never learnt the size")
            XCTAssertEqual(metadata.size, 300_000)
            XCTAssertTrue(kernel.wait { $0 == .attributes(item.inode) }.contains(.attributes(item.inode)),
                          "the kernel was never told that the size changed")
        }
        XCTAssertNotNil(settled)
    }
}
