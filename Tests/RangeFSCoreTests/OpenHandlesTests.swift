import Logging
@testable import RangeFSCache
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// `OpenHandles`, the table of files open through the kernel, on its own: handles are distinct and forgotten once,
/// passthrough is decided per inode, READs are counted per inode, each handle asks for its file's completion once,
/// and each has its own readahead window.
final class OpenHandlesTests: XCTestCase {
    let logger = Logger(label: "test")
    var directory: TemporaryDirectory!
    var store: CacheStore!
    var entry: CacheEntry!
    let size: UInt64 = 1 << 20

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "handles")
        store = try CacheStore(root: directory.path, logger: logger)
        let metadata = RemoteMetadata(url: "http://origin/file.bin", size: size, etag: "\"v1\"", lastModified: "")
        entry = try store.entry(for: metadata, blockSize: 65536)
    }

    override func tearDown() {
        entry = nil
        store = nil
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    /// A handle on `entry` as file `inode`, not in passthrough.
    func openNormal(_ handles: OpenHandles, inode: UInt64 = 10) -> UInt64 {
        let (handle, passthrough) = handles.open(inode: inode, entry: entry, readaheadMaximum: 1 << 20) { _, _ in
            false
        }
        XCTAssertFalse(passthrough)
        return handle
    }

    /// The entry of a file of unknown size (an entry of a capacity); nothing is fetched unless it is read.
    func makeUnsizedEntry() throws -> CacheEntry {
        let metadata = RemoteMetadata.unsized(url: "http://origin/stream.bin", etag: "\"s1\"", lastModified: "")
        return try store.entry(for: metadata, blockSize: 65536)
    }

    /// A handle on `entry` as file `inode`, not in passthrough.
    func openNormal(_ handles: OpenHandles, inode: UInt64, on entry: CacheEntry) -> UInt64 {
        handles.open(inode: inode, entry: entry, readaheadMaximum: 1 << 20) { _, _ in false }.handle
    }

    /// `startFill` of a planned read.
    func startsFill(_ read: OpenHandles.Read?) -> Bool? {
        switch read {
        case .blocks(_, _, let startFill): startFill
        case nil: nil
        }
    }

    func testHandlesAreDistinctAndEachIsForgottenOnce() throws {
        let handles = OpenHandles()
        let first = openNormal(handles)
        let stream = openNormal(handles, inode: 20, on: try makeUnsizedEntry())
        let second = openNormal(handles)
        XCTAssertEqual(Set([first, stream, second]).count, 3, "handles of every file share one numbering")

        let closed = handles.close(first)
        XCTAssertEqual(closed?.inode, 10)
        XCTAssertTrue(closed?.entry === entry)
        XCTAssertNil(handles.close(first), "a handle is forgotten once: a second release finds nothing to end")
        XCTAssertNil(handles.plan(first, offset: 0, count: 4096, fillAfter: nil), "a closed handle reads nothing")
        XCTAssertNil(handles.readaheadWindow(of: first))

        XCTAssertTrue(handles.isOpen(10), "another handle still has inode 10 open")
        XCTAssertTrue(handles.entry(openOn: 10) === entry)
        XCTAssertTrue(handles.isOpen(20))
        XCTAssertEqual(handles.entry(openOn: 20)?.header.sizeKnown, false, "a file of unknown size has an entry")
        XCTAssertEqual(handles.close(stream)?.inode, 20)
        XCTAssertFalse(handles.isOpen(20))
        XCTAssertNil(handles.entry(openOn: 20))

        _ = handles.close(second)
        XCTAssertFalse(handles.isOpen(10))
        XCTAssertNil(handles.entry(openOn: 10))
    }

    /// The decision is given the handles of the same inode open each way, and its answer is the handle's mode.
    func testPassthroughIsDecidedFromTheHandlesOfTheSameInode() {
        let handles = OpenHandles()
        var seen: [(normal: Int, passthrough: Int)] = []
        func open(inode: UInt64, passthrough wanted: Bool) -> (handle: UInt64, passthrough: Bool) {
            handles.open(inode: inode, entry: entry, readaheadMaximum: 1 << 20) { normal, passing in
                seen.append((normal, passing))
                return wanted
            }
        }
        let normal = open(inode: 10, passthrough: false)
        let passing = open(inode: 10, passthrough: true)
        let other = open(inode: 11, passthrough: true)
        let third = open(inode: 10, passthrough: true)
        XCTAssertEqual(seen.map(\.normal), [0, 1, 0, 1])
        XCTAssertEqual(seen.map(\.passthrough), [0, 0, 0, 1], "inode 11's handle does not count for inode 10")
        XCTAssertEqual([normal.passthrough, passing.passthrough, other.passthrough, third.passthrough],
                       [false, true, true, true])
        XCTAssertEqual(handles.usage(of: 10).passthrough, 2)
        XCTAssertEqual(handles.usage(of: 11).passthrough, 1)

        // A handle whose backing file could not be set up becomes a normal one, once.
        XCTAssertNil(handles.clearPassthrough(normal.handle), "a normal handle has no passthrough to end")
        XCTAssertTrue(handles.clearPassthrough(passing.handle) === entry)
        XCTAssertNil(handles.clearPassthrough(passing.handle))
        XCTAssertEqual(handles.usage(of: 10).passthrough, 1)
        _ = open(inode: 10, passthrough: false)
        XCTAssertEqual(seen.last?.normal, 2, "the cleared handle now counts as normal")
        XCTAssertEqual(seen.last?.passthrough, 1)

        // Release ends passthrough only for a handle still in it (RangeFS.release reads `passthrough`).
        XCTAssertEqual(handles.close(passing.handle)?.passthrough, false)
        XCTAssertEqual(handles.close(third.handle)?.passthrough, true)
        XCTAssertEqual(handles.usage(of: 10).passthrough, 0)
    }

    /// READs answered are counted per inode over all its handles, and stay counted after they close.
    func testReadsAreCountedPerInodeSinceTheMount() {
        let handles = OpenHandles()
        let first = openNormal(handles, inode: 10)
        let second = openNormal(handles, inode: 10)
        let other = openNormal(handles, inode: 11)
        for index in 0..<3 { _ = handles.plan(first, offset: UInt64(index) * 4096, count: 4096, fillAfter: nil) }
        for index in 0..<2 { _ = handles.plan(second, offset: UInt64(index) * 4096, count: 4096, fillAfter: nil) }
        _ = handles.plan(other, offset: 0, count: 4096, fillAfter: nil)
        XCTAssertEqual(handles.usage(of: 10).reads, 5)
        XCTAssertEqual(handles.usage(of: 11).reads, 1)
        _ = handles.close(first)
        _ = handles.close(second)
        XCTAssertEqual(handles.usage(of: 10).reads, 5)
        XCTAssertEqual(handles.usage(of: 12).reads, 0)
    }

    /// With `fillAfter`, the read that brings a handle's reads to that many bytes, and only that one, asks for the
    /// file to be completed; each handle counts its own reads. The plan is clipped to the entry's size.
    func testAFileHandleAsksForCompletionOnceWhenItsReadsReachTheThreshold() throws {
        let handles = OpenHandles()
        let handle = openNormal(handles)
        let asked = (0..<5).map { index in
            startsFill(handles.plan(handle, offset: UInt64(index) * 4096, count: 4096, fillAfter: 10_000))
        }
        XCTAssertEqual(asked, [false, false, true, false, false])

        let other = openNormal(handles)
        XCTAssertEqual(startsFill(handles.plan(other, offset: 0, count: 16384, fillAfter: 10_000)), true)
        let never = openNormal(handles)
        XCTAssertEqual(startsFill(handles.plan(never, offset: 0, count: 1 << 20, fillAfter: nil)), false)

        guard case .blocks(let file, let plan, _)? = handles.plan(handle, offset: size - 100, count: 4096,
                                                                  fillAfter: nil)
        else { return XCTFail("a file handle plans blocks") }
        XCTAssertTrue(file.entry === entry)
        XCTAssertEqual(plan.range, (size - 100)..<size)
    }

    /// Issue 46, one pipeline: the handles of a file of unknown size move to the entry its stream grew or settled
    /// into, keeping their planner and whether they asked for completion; others stay.
    func testHandlesOfAReshapedEntryMoveToTheNewOne() throws {
        let handles = OpenHandles()
        let unsized = try makeUnsizedEntry()
        let reading = openNormal(handles, inode: 20, on: unsized)
        let other = openNormal(handles)
        XCTAssertEqual(startsFill(handles.plan(reading, offset: 0, count: 30_000, fillAfter: 20_000)), true)
        XCTAssertEqual(handles.replaceEntry(unsized, with: entry), 1, "one handle read the reshaped entry")
        guard case .blocks(let file, _, let startFill)? = handles.plan(reading, offset: 30_000, count: 4096,
                                                                       fillAfter: 20_000)
        else { return XCTFail("the handle is still open") }
        XCTAssertTrue(file.entry === entry, "it reads the new entry")
        XCTAssertFalse(startFill, "it asked for completion already")
        XCTAssertEqual(handles.replaceEntry(unsized, with: entry), 0, "none reads the old one any more")
        XCTAssertTrue(handles.close(other)?.entry === entry)
    }

    /// Each handle keeps its own readahead window: one reader's sequential stream does not widen another's.
    func testEachHandleHasItsOwnReadaheadWindow() {
        let handles = OpenHandles()
        let reader = openNormal(handles)
        let other = openNormal(handles)
        XCTAssertEqual(handles.readaheadWindow(of: reader), 0)
        for index in 0..<4 {
            _ = handles.plan(reader, offset: UInt64(index) << 17, count: 1 << 17, fillAfter: nil)
        }
        XCTAssertGreaterThan(try XCTUnwrap(handles.readaheadWindow(of: reader)), 0)
        XCTAssertEqual(handles.readaheadWindow(of: other), 0)
    }
}
