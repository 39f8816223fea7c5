import Foundation
@testable import RangeFSCache
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// A server that ignores Range is streamed whole from its first byte. Under a cap smaller than the file, the blocks a
/// stream stored are evicted behind it; a reader that then needs one of them must get it by another stream, not wait
/// for one that has passed it (issue 46: found by the unsized-path work, where such a read hung).
final class RangelessCapTests: FolderTestCase {
    override class var folderPrefix: String { "rangeless-cap" }
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 3_000_000, seed: 7)

    func testAFileLargerThanTheCapOfAServerWithoutRangeReadsWholeTwice() throws {
        try readWholeTwice(sendsNoLength: false)
    }

    func testAFileWithoutALengthLargerThanTheCapReadsWholeTwice() throws {
        try readWholeTwice(sendsNoLength: true)
    }

    /// The stall made certain: the stream is slowed so that it is still running, half-way, when a reader asks for
    /// a block it stored at its start and the cap evicted since. That reader found the stream running and waited
    /// for it; it never came back for the block.
    func testABlockEvictedBehindARunningStreamIsBroughtByAnother() throws {
        let origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        origin.ignoresRange = true
        origin.chunkDelay = 0.005  // 16 KiB every 5 ms: the 3 MB take at least 0.9 s
        var storeSettings = StoreSettings()
        storeSettings.maxBytes = 512 << 10
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                                                storeSettings: storeSettings)
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096,
                                                                  timeout: 60)).get(), Array(bytes[..<4096]))
        let deadline = Date().addingTimeInterval(60)
        while origin.bodyBytesDelivered < 1_500_000, Date() < deadline { usleep(1_000) }
        XCTAssertFalse(fileSystem.store.openEntry(for: url)?.isComplete ?? true, "the stream is still running")
        let offset = 65_536 + 100
        let result = fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: 4096, timeout: 60)
        XCTAssertEqual(try XCTUnwrap(result, "the read of an evicted block never answered").get(),
                       Array(bytes[offset..<(offset + 4096)]))
        fileSystem.release(handle)
    }

    private func readWholeTwice(sendsNoLength: Bool) throws {
        let origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        origin.ignoresRange = true
        origin.sendsNoLength = sendsNoLength
        var storeSettings = StoreSettings()
        storeSettings.maxBytes = 512 << 10
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                                                storeSettings: storeSettings)
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
        for round in 1...2 {
            let handle = try fileSystem.open(inode).get().handle
            var offset = 0
            while offset < bytes.count {
                let count = min(128 << 10, bytes.count - offset)
                guard let result = fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: count,
                                                                  timeout: 60) else {
                    return XCTFail("round \(round): the read at \(offset) never answered")
                }
                let got = try result.get()
                XCTAssertTrue(got[...] == bytes[offset..<(offset + count)], "round \(round): bytes at \(offset) differ")
                offset += count
            }
            fileSystem.release(handle)
        }
    }
}
