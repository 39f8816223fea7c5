import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// A complete file from an earlier run is checked against its CRCs in one pass at its open
/// (CacheEntry+OnePassCheck.swift), not one READ at a time, so that its first open after a remount passes through.
final class OnePassCheckTests: XCTestCase {
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 5_000_000)  // 77 blocks of 64 KiB
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!

    override func tearDown() {
        origin = nil
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "onepass")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
    }

    /// A mount of the cache, with passthrough on as the kernel would have settled it.
    func mount(adjust: (inout FileSystemSettings) -> Void = { _ in }) throws -> RangeFS {
        try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                               passthrough: LockedBox(PassthroughMode.on), adjust: adjust)
    }

    /// Unmounts as a daemon stops: committed, and the cache's lock free for the next mount.
    func unmount(_ fileSystem: RangeFS) {
        fileSystem.store.markStopping()
        _ = fileSystem.store.close()
    }

    func inode(in fileSystem: RangeFS) throws -> UInt64 {
        try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
    }

    /// Reads the whole file through `fileSystem`, in READs of 1 MiB as the kernel sends them.
    func readAll(_ fileSystem: RangeFS, handle: UInt64) throws -> [UInt8] {
        var read: [UInt8] = []
        while read.count < bytes.count {
            let part = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: UInt64(read.count),
                                                                  count: 1 << 20)).get()
            if part.isEmpty { break }
            read += part
        }
        return read
    }

    /// A first mount that reads the whole file and stops; returns the entry's data file.
    func cacheTheWholeFile() throws -> String {
        let first = try mount()
        let handle = try first.open(try inode(in: first)).get().handle
        XCTAssertEqual(try readAll(first, handle: handle), bytes)
        first.release(handle)
        let folder = try XCTUnwrap(first.store.openEntry(for: url)).dataPath
        unmount(first)
        return folder
    }

    func testACompleteFileIsCheckedAtItsFirstOpenAfterARemountAndPassesThrough() throws {
        _ = try cacheTheWholeFile()
        let requests = origin.requests.count
        let second = try mount()
        defer { unmount(second) }
        let opened = try second.open(try inode(in: second)).get()
        let entry = try XCTUnwrap(second.store.openEntry(for: url))
        XCTAssertTrue(entry.isDurablyComplete, "every block is checked once the open is answered, before any READ")
        XCTAssertNotNil(opened.passthroughFile, "the first open after a remount passes the checked file through")
        XCTAssertEqual(origin.requests.count, requests, "the check reads the disk only")
        second.release(opened.handle)
    }

    func testTheCheckReadsTheDataFileInLargeReadsNotOneReadPerBlock() throws {
        _ = try cacheTheWholeFile()
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let entry = try store.entry(for: try XCTUnwrap(origin.probeAll([url]).first).get(), blockSize: 65536)
        XCTAssertTrue(entry.awaitsOnePassCheck)
        let found = entry.checkInOnePass()
        XCTAssertEqual(found.checked, 77)
        XCTAssertEqual(found.failed, 0)
        XCTAssertEqual(found.reads, 2, "5 MB in reads of 4 MiB")
        XCTAssertTrue(entry.isDurablyComplete)
        XCTAssertFalse(entry.awaitsOnePassCheck)
        XCTAssertEqual(entry.checkInOnePass().checked, 0, "checked blocks are not checked again")
    }

    func testAPassStopsWhenAskedAndTheNextGoesOnWithWhatIsLeft() throws {
        _ = try cacheTheWholeFile()
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let entry = try store.entry(for: try XCTUnwrap(origin.probeAll([url]).first).get(), blockSize: 65536)
        var asked = 0
        let first = entry.checkInOnePass { asked += 1; return asked == 1 }  // as when the last handle closes
        XCTAssertEqual(first.reads, 1)
        XCTAssertEqual(first.checked, 64, "one read of 4 MiB")
        XCTAssertTrue(entry.awaitsOnePassCheck)
        XCTAssertEqual(entry.checkInOnePass().checked, 13, "the rest")
        XCTAssertTrue(entry.isDurablyComplete)
    }

    func testABlockThatFailsTheOpensCheckIsAbsentAndFetchedAgainNeverServed() throws {
        let folder = try cacheTheWholeFile()
        // A rotten sector in block 10.
        try SystemFile(path: folder, flags: O_RDWR).write([0xDE, 0xAD, 0xBE, 0xEF], at: 10 * 65536 + 777)
        let requests = origin.requests.count
        let second = try mount()
        defer { unmount(second) }
        let opened = try second.open(try inode(in: second)).get()
        let entry = try XCTUnwrap(second.store.openEntry(for: url))
        XCTAssertFalse(entry.isPresent(10), "the open's check found the damaged block")
        XCTAssertEqual(entry.presentBlocks.setCount, 76, "and only it")
        XCTAssertNil(opened.passthroughFile, "a file with a hole is never passed through")
        XCTAssertEqual(try readAll(second, handle: opened.handle), bytes, "the damaged block is fetched again")
        let refetched = origin.requests.dropFirst(requests).compactMap(\.range)
        XCTAssertTrue(refetched.contains { $0.contains(10 * 65536 + 777) }, "\(refetched)")
        XCTAssertLessThanOrEqual(refetched.reduce(0) { $0 + $1.count }, 1 << 20, "only the damaged block")
        second.release(opened.handle)
    }

    /// A small file (one file holding data and records, never passed through) is checked with one pread, not
    /// locked in place: a rotten byte is found all the same, and the block fetched again.
    func testASmallFilesCheckReadsItAndFindsARottenBlock() throws {
        let smallURL = "http://origin/small.bin"
        let small = pseudoRandomBytes(count: 200_000)
        origin.serve(smallURL, bytes: small)
        func mountSmall() throws -> RangeFS {
            try makeTestFileSystem(origin: origin, urls: [smallURL], directory: directory.path,
                                   passthrough: LockedBox(PassthroughMode.on))
        }
        func read(_ fileSystem: RangeFS) throws -> (handle: UInt64, bytes: [UInt8]) {
            let inode = try XCTUnwrap(fileSystem.catalog.item(named: "small.bin")).inode
            let handle = try fileSystem.open(inode).get().handle
            let read = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 0, count: 1 << 20)).get()
            return (handle, read)
        }
        // In a scope of its own: the first mount's cache lock goes with it.
        let path = try { () throws -> String in
            let first = try mountSmall()
            let cold = try read(first)
            XCTAssertTrue(cold.bytes == small)
            first.release(cold.handle)
            let path = try XCTUnwrap(first.store.openEntry(for: smallURL)).dataPath
            unmount(first)
            return path
        }()
        try SystemFile(path: path, flags: O_RDWR).write([0xDE, 0xAD], at: 2 * 65536 + 5)  // block 2
        let requests = origin.requests.count
        let second = try mountSmall()
        defer { unmount(second) }
        let entry = try second.store.entry(for: try XCTUnwrap(origin.probeAll([smallURL]).first).get(),
                                           blockSize: 65536)
        let found = entry.checkInOnePass()
        XCTAssertEqual(found.checked, 4)
        XCTAssertEqual(found.failed, 1)
        XCTAssertFalse(entry.isPresent(2))
        let again = try read(second)
        XCTAssertTrue(again.bytes == small, "the rotten block is fetched again, never served")
        XCTAssertEqual(origin.requests.dropFirst(requests).compactMap(\.range).count, 1)
        second.release(again.handle)
    }

    func testALargeFileIsCheckedInTheBackgroundAndItsNextOpenPassesThrough() throws {
        _ = try cacheTheWholeFile()
        let second = try mount { $0.openCheckBytes = 1 << 20 }
        defer { unmount(second) }
        let inode = try inode(in: second)
        let first = try second.open(inode).get()
        let entry = try XCTUnwrap(second.store.openEntry(for: url))
        // The open did not wait for the check; it runs on the verify queue (generous wait for a loaded machine).
        let deadline = ContinuousClock.now + .seconds(30)
        while !entry.isDurablyComplete && ContinuousClock.now < deadline { usleep(10_000) }
        XCTAssertTrue(entry.isDurablyComplete, "the background check covers every block")
        XCTAssertEqual(try readAll(second, handle: first.handle), bytes)
        second.release(first.handle)
        let next = try second.open(inode).get()
        XCTAssertNotNil(next.passthroughFile, "once checked, the file passes through")
        second.release(next.handle)
    }
}
