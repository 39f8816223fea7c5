import Glibc
import Logging
@testable import RangeFSCache
import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Files whose server sends no length, without FUSE: streamed from byte 0 by the block pipeline into an entry of
/// unknown size, served as the stream passes, settled at the size found at the end, and kept across restarts
/// (issue 46, one pipeline: what the old UnsizedDownload did, now the block pipeline's).
final class UnsizedDownloadTests: XCTestCase {
    let url = "http://origin/stream.bin"
    let bytes = pseudoRandomBytes(count: 3_000_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "unsized")
        origin = MemoryOrigin()
        origin.sendsNoLength = true
        origin.serve(url, bytes: bytes)
    }

    override func tearDown() {
        origin = nil
        directory = nil
        super.tearDown()
    }

    func makeFileSystem(prefetch: PrefetchPolicy = .none, attempts: Int = 4, maxBytes: Int? = nil,
                        reportGate: ReportGate? = nil) throws -> RangeFS {
        var policy = FetchPolicy()
        policy.attempts = attempts
        policy.retryDelay = .milliseconds(10)
        var settings = StoreSettings()
        settings.maxBytes = maxBytes
        return try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, policy: policy,
                                      prefetch: prefetch, storeSettings: settings, reportGate: reportGate)
    }

    /// Holds back the store's report that the stream's entry was reshaped, as a busy report thread does.
    static func holdingReshapes() -> ReportGate {
        ReportGate { event in
            if case .reshaped = event { return true }
            return false
        }
    }

    /// What keeps the blocks of each open entry from eviction, for a failure's message.
    static func evictionState(_ fileSystem: RangeFS) -> String {
        fileSystem.store.entries.withLock { Array($0.values) }.map { entry in
            entry.state.withLock { state in
                let present = state.blocks.present.setCount
                let evictable = (0..<entry.blockCount).filter { state.blocks.isEvictable($0) }.count
                return "\(entry.header.sizeKnown ? "sized" : "unsized") \(entry.size): \(present) present, "
                    + "\(evictable) evictable, stale \(state.stale), pinned \(state.eviction.pinned), passthrough "
                    + "\(state.eviction.passthroughHandles), serving \(state.eviction.serving), held \(entry.use.isHeld), "
                    + "streaming \(state.streaming), stamped \(state.eviction.stamps.filter { $0 > 0 }.count)"
            }
        }.joined(separator: "; ")
    }

    /// Reads the whole file as `cp` does through direct I/O: 128 KiB at a time until an empty read.
    func readToEnd(_ fileSystem: RangeFS, handle: UInt64) throws -> [UInt8] {
        try XCTUnwrap(fileSystem.readToEnd(handle: handle)).get()
    }

    /// A reader that read to the end finds the file of its size at once, even while the store's report of the
    /// stream's end waits in the queue (a busy machine's report thread): `cat f; getfattr -n user.rangefs.state f`
    /// said "partial", and the catalog still had no size, for as long as the report waited.
    func testAReaderAtTheEndFindsTheSizeBeforeTheReportComes() throws {
        let gate = Self.holdingReshapes()
        defer { gate.release() }
        let fileSystem = try makeFileSystem(reportGate: gate)
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
        XCTAssertEqual(gate.held.wait(timeout: .now() + 60), .success, "the reshape's report is still held")
        XCTAssertEqual(fileSystem.catalog.item(inode: item.inode)?.metadata.sizeKnown, true)
        XCTAssertEqual(try fileSystem.attributes(of: item.inode).get().size, UInt64(bytes.count))
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.state", of: item.inode).get(), "complete")
        fileSystem.release(handle)
    }

    /// A file system whose one file's stream went to its end while its reader read the first 4 KiB and stopped,
    /// with the store's report of that end held by `reportGate`: the file as listed, and the reader's handle.
    func streamToItsEndPastAReaderThatStopped(reportGate gate: ReportGate) throws
        -> (fileSystem: RangeFS, item: CatalogItem, handle: UInt64) {
        let fileSystem = try makeFileSystem(reportGate: gate)
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096)?.get(),
                       Array(bytes[0..<4096]))
        XCTAssertEqual(gate.held.wait(timeout: .now() + 60), .success, "the stream ended; its report is held")
        return (fileSystem, item, handle)
    }

    /// A stream that ends with nobody reading at its end (its reader read the first bytes and stopped) shows the
    /// file complete in its attributes at once, while the store's report of the end still waits: `getfattr` said
    /// "partial" until the report was handled.
    func testAStreamThatEndedWithNoReaderAtItsEndShowsCompleteBeforeTheReportComes() throws {
        let gate = Self.holdingReshapes()
        defer { gate.release() }
        let (fileSystem, item, handle) = try streamToItsEndPastAReaderThatStopped(reportGate: gate)
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.state", of: item.inode).get(), "complete")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.progress", of: item.inode).get(), "100.0%")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.cached_bytes", of: item.inode).get(),
                       String(bytes.count))
        fileSystem.release(handle)
    }

    /// The same in `rangefs status`: the file is complete, of its size, while the report still waits.
    func testAStreamThatEndedWithNoReaderAtItsEndIsCompleteInTheStatusBeforeTheReportComes() throws {
        let gate = Self.holdingReshapes()
        defer { gate.release() }
        let (fileSystem, item, handle) = try streamToItsEndPastAReaderThatStopped(reportGate: gate)
        let shown = try XCTUnwrap(fileSystem.status(all: true).files.first)
        XCTAssertEqual(shown.state, "complete")
        XCTAssertEqual(shown.size, UInt64(bytes.count))
        XCTAssertEqual(shown.cachedBytes, UInt64(bytes.count))
        fileSystem.release(handle)
    }

    func testAStreamIsReadToItsEndAndThenIsAnOrdinaryFileOfKnownSize() throws {
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        XCTAssertFalse(item.metadata.sizeKnown)
        XCTAssertEqual(try fileSystem.attributes(of: item.inode).get().size, 0, "nothing streamed yet")

        let opened = try fileSystem.open(item.inode).get()
        XCTAssertTrue(opened.directIO, "the kernel must ask past the size it knows")
        let second = try fileSystem.open(item.inode).get()
        XCTAssertEqual(try readToEnd(fileSystem, handle: opened.handle), bytes)
        XCTAssertEqual(try readToEnd(fileSystem, handle: second.handle), bytes, "a second reader shares the stream")
        XCTAssertEqual(origin.requests.count, 1, "one stream for both readers")
        fileSystem.release(opened.handle)
        fileSystem.release(second.handle)

        let known = try XCTUnwrap(fileSystem.catalog.item(inode: item.inode))
        XCTAssertTrue(known.metadata.sizeKnown)
        XCTAssertEqual(try fileSystem.attributes(of: item.inode).get().size, UInt64(bytes.count))
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.state", of: item.inode).get(), "complete")
        // Settled in the v2 layout: no v1 folder is made.
        XCTAssertNotEqual(access(fileSystem.store.directory(for: url), F_OK), 0, "no v1 folder")
        guard case .entry(let installed) = EntryFiles(root: fileSystem.store.root, url: url).load() else {
            return XCTFail("a complete stream is a v2 entry")
        }
        XCTAssertEqual(installed.meta.slot?.present.isFull, true)
        let reopened = try fileSystem.open(item.inode).get()
        XCTAssertFalse(reopened.directIO)
        XCTAssertEqual(try fileSystem.readSynchronously(handle: reopened.handle, offset: 1_000_000, count: 4096)?.get(),
                       Array(bytes[1_000_000..<1_004_096]))
        XCTAssertEqual(origin.requests.count, 1, "served from the cache entry")
        XCTAssertEqual(fileSystem.store.settled(.unsized(url: url, etag: "", lastModified: origin.lastModified)).size,
                       UInt64(bytes.count), "a later probe without a length gets the cached size")
        XCTAssertEqual(fileSystem.store.storedEntry(for: url)?.present.isFull, true)
    }

    /// Streams the file in a RangeFS of its own, whose connection drops at 1,000,000 bytes, and unmounts it (its
    /// store commits what it holds: 15 whole blocks of 64 KiB, `keptBytes`); returns when that RangeFS is gone, as a
    /// restart finds the cache.
    func streamUntilTheConnectionDrops() throws {
        origin.dropAfterBytes = 1_000_000
        origin.dropsLeft = 1
        origin.downAfterDrop = true  // the sink would take the stream up again at once: a restart finds it gone
        // The broken stream's thread lets go of the store (and its lock) just after the reader got its error; the
        // restart that follows needs the lock, as a new process would (`withFileSystem` waits for it).
        let released = try withFileSystem({ try makeFileSystem(attempts: 1) }) { fileSystem in
            let item = try XCTUnwrap(fileSystem.catalog.items.first)
            let handle = try fileSystem.open(item.inode).get().handle
            XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 65536)?.get(),
                           Array(bytes[..<65536]))
            // A read issued after the stream broke starts another, and so does the sink's own retry: the server is
            // down from the drop on (`downAfterDrop`), as a restart would find it gone.
            guard case .failure = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 2_000_000,
                                                                              count: 4096))
            else { return XCTFail("the stream broke at 1,000,000 bytes") }
            fileSystem.release(handle)
        }
        XCTAssertTrue(released, "the first mount's store was released")
        origin.isDown = false
    }

    /// Issue 38: a stream's answer (to a request without Range) whose Content-Range names a part of the file says
    /// two things of its body; none of it is kept or served (ResponseHead+Range.swift).
    func testAStreamWhoseAnswerNamesAPartIsRefused() throws {
        origin.extraHeaders = ["content-range": "bytes 0-99/3000000"]
        let fileSystem = try makeFileSystem(attempts: 2)
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        guard case .failure(.io) = try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096))
        else { return XCTFail("expected EIO") }
        XCTAssertEqual(try fileSystem.attributes(of: item.inode).get().cachedBytes, 0)
        origin.extraHeaders = [:]
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes, "an answer without the lie is read")
    }

    /// The whole blocks a stream cut at 1,000,000 bytes keeps (64 KiB blocks).
    let keptBytes: UInt64 = 15 * 65536

    func testAStoppedStreamKeepsWhatItStoredAndTheNextStreamChecksIt() throws {
        try streamUntilTheConnectionDrops()
        // A restart: the stored bytes are there before any request.
        let before = origin.requests.count
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        XCTAssertEqual(try fileSystem.attributes(of: item.inode).get().size, keptBytes, "the bytes so far")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.progress", of: item.inode).get(), "size unknown")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.cached_bytes", of: item.inode).get(),
                       String(keptBytes))
        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 500_000, count: 4096)?.get(),
                       Array(bytes[500_000..<504_096]))
        XCTAssertEqual(origin.requests.count, before, "cached bytes need no stream")
        XCTAssertEqual(try readToEnd(fileSystem, handle: handle), bytes)
    }

    /// Issue 46: a handle opened while the file streamed read the stream's descriptor after the stream completed,
    /// and that descriptor is the entry's data file: blocks evicted under `--cache-max-size` then read as zeros
    /// (on a mount: all 64 MiB of a file wrong through the old handle, no error). It now reads through the entry.
    func testAHandleOpenedOnTheStreamReadsRightAfterItsBlocksAreEvicted() throws {
        try readsAfterEviction(fileSystem: makeFileSystem(maxBytes: 512 << 10))
    }

    /// The same while the store's report of the reshape waits in the queue (the report thread of a busy machine):
    /// the handle is still on the old entry, the new one holds the use lent for it, and the cap is a cap.
    func testAHandleOpenedOnTheStreamReadsAfterEvictionBeforeTheReshapeIsReported() throws {
        let gate = Self.holdingReshapes()
        defer { gate.release() }
        try readsAfterEviction(fileSystem: makeFileSystem(maxBytes: 512 << 10, reportGate: gate)) {
            XCTAssertEqual(gate.held.wait(timeout: .now() + 60), .success, "the reshape's report was held")
        }
    }

    /// Streams the file whole on one handle, opens it again, evicts, and reads through the first handle;
    /// `beforeEviction` runs just before the eviction.
    func readsAfterEviction(fileSystem: RangeFS, beforeEviction: () -> Void = {}) throws {
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let streamed = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try readToEnd(fileSystem, handle: streamed), bytes)
        // Another open of the now ordinary file counts its blocks under the cap; a block written elsewhere evicts.
        let opened = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: opened, offset: 0, count: 4096)?.get(),
                       Array(bytes[..<4096]))
        fileSystem.release(opened)
        // Block 0 went under the cap while the file streamed, so that read started another stream from byte 0
        // (the server has no Range). Its blocks count under the cap from their arrival: the eviction below waits
        // for its end and its writes (two busy cores left it running, 1.9 MB counted). A deadline for a hang only.
        let deadline = Date().addingTimeInterval(60)
        while fileSystem.store.openEntry(for: url)?.state.withLock({ $0.streaming }) == true, Date() < deadline {
            usleep(10_000)
        }
        fileSystem.store.waitForWrites()
        beforeEviction()
        fileSystem.store.ledger.reserveRoom(for: 0)
        XCTAssertLessThanOrEqual(fileSystem.store.ledger.usedBytes, 512 << 10,
                                 "blocks were evicted; the store's open entries: \(Self.evictionState(fileSystem))")
        for offset in stride(from: 0, to: bytes.count, by: 500_000) {
            XCTAssertEqual(try fileSystem.readSynchronously(handle: streamed, offset: UInt64(offset), count: 4096)?.get(),
                           Array(bytes[offset..<(offset + 4096)]), "at \(offset)")
        }
        fileSystem.release(streamed)
        // A whole read under this cap, smaller than the file, of a server without Range: each block the stream
        // passed and the cap evicted before the reader came is brought by another stream (RangelessCapTests).
        let fresh = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try readToEnd(fileSystem, handle: fresh), bytes)
        fileSystem.release(fresh)
    }

    /// Issue 46: `rangefs verify --cache` after a stream stopped (a kill, a dropped connection) named the folder
    /// "started, never committed; it holds nothing" while a remount serves its kept bytes. They are blocks of an
    /// entry of unknown size now, with their CRCs, verified like any others.
    func testVerifyNamesTheBytesAnUnfinishedStreamKeeps() throws {
        try streamUntilTheConnectionDrops()
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let reports = store.entryFolders().map { store.verify(folder: $0, repair: false) }
        XCTAssertEqual(reports.count, 1)
        let report = try XCTUnwrap(reports.first)
        XCTAssertTrue(report.isHealthy, report.line)
        XCTAssertEqual(report.line, "STREAM  \(url): 15 blocks verified of a file whose size is not yet known (its "
                       + "server sends no length; the entry holds up to \(CacheHeader.unsizedCapacity) bytes until the "
                       + "stream ends)")
    }

    func testOtherBytesThanThoseCachedReplaceThemFromTheFirstDifference() throws {
        try streamUntilTheConnectionDrops()
        // Same date, no ETag: only the bytes tell that the file changed at 600,000.
        var changed = bytes
        for index in 600_000..<700_000 { changed[index] ^= 0xFF }
        origin.serve(url, bytes: changed)
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let old = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: old, offset: 0, count: 4096)?.get(), Array(bytes[..<4096]))
        // Reading on makes the stream meet the difference; the handle that read the old bytes gets ESTALE.
        XCTAssertEqual(fileSystem.readSynchronously(handle: old, offset: 2_000_000, count: 4096), .failure(.stale))
        fileSystem.release(old)
        let fresh = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try readToEnd(fileSystem, handle: fresh), changed)
    }

    func testFillPolicyCompletesAStreamNobodyReads() throws {
        let fileSystem = try makeFileSystem(prefetch: .all)
        fileSystem.fillAll()
        let inode = try XCTUnwrap(fileSystem.catalog.items.first).inode
        let deadline = Date() + 10
        while fileSystem.catalog.item(inode: inode)?.metadata.sizeKnown != true && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, UInt64(bytes.count))
    }

    func testWithoutFillAStreamNobodyReadsStops() throws {
        // 16 KiB every 50 ms: the 3 MB take 9 s; a stream asks every second whether anybody still wants it.
        origin.chunkDelay = 0.05
        let fileSystem = try makeFileSystem()
        let item = try XCTUnwrap(fileSystem.catalog.items.first)
        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: 4096)?.get(), Array(bytes[..<4096]))
        fileSystem.release(handle)
        let deadline = Date().addingTimeInterval(60)  // a deadline for a hang only: the stream ends when it asks
        while fileSystem.isStreaming(url) && Date() < deadline { usleep(10_000) }
        XCTAssertFalse(fileSystem.isStreaming(url))
        XCTAssertLessThan(origin.bodyBytesDelivered, UInt64(bytes.count / 2), "the stream stopped once the file was closed")
        XCTAssertFalse(try XCTUnwrap(fileSystem.catalog.items.first).metadata.sizeKnown)
    }
}
