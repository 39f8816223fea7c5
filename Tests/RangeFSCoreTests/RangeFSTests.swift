import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// The filesystem without FUSE, against an in-memory origin.
final class RangeFSTests: XCTestCase {
    let url = "http://origin/data.bin"
    let bytes = pseudoRandomBytes(count: 5_000_000)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var fileSystem: RangeFS!

    override func tearDown() {
        fileSystem = nil
        origin = nil
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "fs")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        fileSystem = try makeFileSystem()
    }

    func makeFileSystem() throws -> RangeFS {
        try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path)
    }

    func read(_ handle: UInt64, offset: UInt64, count: Int) -> Result<[UInt8], FileSystemError> {
        let result = fileSystem.readSynchronously(handle: handle, offset: offset, count: count)
        XCTAssertNotNil(result, "the read was never answered")
        return result ?? .failure(.io("no reply"))
    }

    func openFile(_ fileSystem: RangeFS? = nil) throws -> UInt64 {
        let fs = fileSystem ?? self.fileSystem!
        let item = try XCTUnwrap(fs.catalog.item(named: "data.bin"))
        return try fs.open(item.inode).get().handle
    }

    func testReadReturnsTheOriginBytesAndFetchesOnlyTheirBlocks() throws {
        let handle = try openFile()
        let offset = 1_000_000
        XCTAssertEqual(try read(handle, offset: UInt64(offset), count: 100_000).get(), Array(bytes[offset..<(offset + 100_000)]))
        // Bytes 1,000,000..<1,100,000 lie in blocks 15 and 16.
        XCTAssertEqual(origin.requests.map(\.range), [983_040..<1_114_112])
        XCTAssertEqual(origin.requests.first?.ifRange, "\"v1\"")
    }

    func testReadsPastTheEndAreShortOrEmpty() throws {
        let handle = try openFile()
        XCTAssertEqual(try read(handle, offset: 4_999_990, count: 100).get(), Array(bytes[4_999_990...]))
        XCTAssertEqual(try read(handle, offset: 6_000_000, count: 100).get(), [])
    }

    func testConcurrentReadersOfOneBlockShareOneRequest() throws {
        origin.latency = 0.3
        let group = DispatchGroup()
        let results = LockedBox<[[UInt8]]>([])
        // Three handles, as three programs would have: every read is the first of its handle, so none reads ahead.
        for offset in [2_000_000, 2_004_096, 2_008_192] {
            let handle = try openFile()
            group.enter()
            DispatchQueue.global().async {
                let bytes = (try? self.read(handle, offset: UInt64(offset), count: 4096).get()) ?? []
                results.withLock { $0.append(bytes) }
                group.leave()
            }
        }
        group.wait()
        XCTAssertEqual(origin.requests.count, 1)
        XCTAssertEqual(results.withLock { $0.count }, 3)
        XCTAssertTrue(results.withLock { $0.allSatisfy { $0.count == 4096 } })
    }

    // Four sequential reads of 128 KiB: readahead fetches past them, a modest window (256 KiB) for a stream this
    // short (issue 36: a reader that stops early must not cost megabytes).
    func testSequentialReadingPrefetchesAhead() throws {
        let handle = try openFile()
        for index in 0..<4 { _ = read(handle, offset: UInt64(index) * 131_072, count: 131_072) }
        let deadline = Date().addingTimeInterval(5)
        while origin.bytesSent < 600_000 && Date() < deadline { usleep(10_000) }
        XCTAssertGreaterThan(origin.bytesSent, 600_000, "readahead should fetch past the 524,288 bytes read")
        XCTAssertLessThanOrEqual(origin.bytesSent, 786_432, "no more than 256 KiB past what was read")
    }

    // A sequential reader's readahead goes out in steps of half a window, not one small request per read: each
    // HTTP request costs the origin and the fetcher a round of headers, and a sliding window made one per READ.
    func testSequentialReadingFetchesInFewRequestsAndNothingTwice() throws {
        let handle = try openFile()
        var copy: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            let count = min(131_072, bytes.count - offset)
            copy += try read(handle, offset: UInt64(offset), count: count).get()
            offset += count
        }
        XCTAssertTrue(copy == bytes, "the sequential copy differs from the origin")
        let requests = origin.requests
        // The first 3 MiB go in steps of half the modest 256 KiB window (one request per two READs); past them the
        // window has grown, and the rest of the 5 MB file takes a few requests.
        XCTAssertLessThanOrEqual(requests.count, 20, "\(requests.count) requests for 39 reads: \(requests.map(\.range))")
        XCTAssertLessThanOrEqual(requests.filter { ($0.range?.lowerBound ?? 0) >= 3 << 20 }.count, 4,
                                 "few requests once the window grew: \(requests.map(\.range))")
        XCTAssertEqual(origin.bytesSent, UInt64(bytes.count), "no byte fetched twice")
    }

    // Under a cache cap smaller than the readahead window, a sequential reader that lags behind its readahead (a
    // busy machine: here it waits for every fetch to land before its next read) still gets each byte fetched once.
    // CI saw an 80 MiB copy through a 24 MiB cap cost 109 MiB: the 32 MiB window's blocks were evicted unread.
    func testALaggingReaderUnderACapFetchesEachByteOnce() throws {
        let url = "http://origin/big.bin", size = 40 << 20
        let bytes = pseudoRandomBytes(count: size, seed: 3)
        origin.serve(url, bytes: bytes)
        var storeSettings = StoreSettings()
        storeSettings.maxBytes = 8 << 20
        fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path + "/capped",
                                            storeSettings: storeSettings)
        let item = try XCTUnwrap(fileSystem.catalog.item(named: "big.bin"))
        let handle = try fileSystem.open(item.inode).get().handle
        var offset = 0
        while offset < size {
            let count = min(1 << 20, size - offset)
            let got = try read(handle, offset: UInt64(offset), count: count).get()
            XCTAssertTrue(got[...] == bytes[offset..<(offset + count)], "bytes at \(offset) differ")
            offset += count
            // The reader lags: whatever readahead asked for lands before it reads on.
            let deadline = Date().addingTimeInterval(20)
            while origin.bodyBytesDelivered < origin.bytesSent, Date() < deadline { usleep(1_000) }
        }
        XCTAssertLessThanOrEqual(fileSystem.handles.readaheadWindow(of: handle) ?? 0, 2 << 20,
                                 "a window of at most a quarter of the cap")
        XCTAssertEqual(origin.bytesSent, UInt64(size),
                       "\(origin.bytesSent - UInt64(size)) bytes fetched twice: \(origin.requests.map(\.range))")
    }

    func testCachedBytesShowInAttributesAndExtendedAttributes() throws {
        let handle = try openFile()
        _ = try read(handle, offset: 0, count: 10).get()
        fileSystem.store.waitForWrites()  // the read is answered from the received block; it counts once written
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
        let attributes = try fileSystem.attributes(of: inode).get()
        XCTAssertEqual(attributes.size, 5_000_000)
        XCTAssertEqual(attributes.cachedBytes, 65536)
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.cached_bytes", of: inode).get(), "65536")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.state", of: inode).get(), "partial")
        XCTAssertEqual(try fileSystem.extendedAttribute("user.rangefs.progress", of: inode).get(), "1.3%")
        XCTAssertEqual(fileSystem.extendedAttribute("user.other", of: inode), .failure(.noSuchAttribute))
        // Outside `user.`: not supported, which `ls -l` remembers for the whole mount instead of asking each file.
        XCTAssertEqual(fileSystem.extendedAttribute("security.selinux", of: inode), .failure(.attributeNotSupported))
        XCTAssertEqual(fileSystem.extendedAttribute("system.posix_acl_access", of: Catalog.rootInode),
                       .failure(.attributeNotSupported))
    }

    func testAFailingOriginFailsTheReadAndCachesNothing() throws {
        let handle = try openFile()
        origin.lastModified = "Mon, 07 Nov 1994 08:49:37 GMT"
        origin.serve(url, bytes: bytes, etag: "\"v2\"")  // If-Range no longer matches: a 200 arrives
        XCTAssertEqual(read(handle, offset: 0, count: 100), .failure(.stale))
        let inode = try XCTUnwrap(fileSystem.catalog.item(named: "data.bin")).inode
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().cachedBytes, 0)
    }

    /// A fetch that finds the file changed fails its readers with ESTALE and probes the URL again, once, even
    /// when the probe cannot tell what the server has now.
    func testOneRemoteChangeMakesOneProbe() throws {
        let handle = try openFile()
        let probesAtMount = origin.probeCount
        origin.lastModified = "Mon, 07 Nov 1994 08:49:37 GMT"
        origin.serve(url, bytes: bytes, etag: "\"v2\"")
        origin.probesFail = true
        XCTAssertEqual(read(handle, offset: 0, count: 100), .failure(.stale))
        usleep(300_000)  // a second probe, if any, runs right behind the first
        XCTAssertEqual(origin.probeCount - probesAtMount, 1)
    }

    /// A server that sends another ETag on every answer for the same length and Last-Modified (nodes behind a load
    /// balancer): the 200 to the If-Range is no change; the ETag is retired, in the header too, and the read goes
    /// on with Last-Modified as the validator.
    func testAnETagThatRotatesIsNoChange() throws {
        let handle = try openFile()
        origin.rotatesETags = true
        XCTAssertEqual(try read(handle, offset: 0, count: 100).get(), Array(bytes[0..<100]))
        XCTAssertEqual(try read(handle, offset: 3_000_000, count: 100).get(), Array(bytes[3_000_000..<3_000_100]))
        let ranged = origin.requests.filter { $0.range != nil }
        XCTAssertEqual(ranged.last?.ifRange, origin.lastModified, "Last-Modified is the validator now")
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        XCTAssertFalse(entry.isStale)
        // Written in the background, off the thread that received the answer.
        func storedETag() throws -> String {
            try XCTUnwrap(fileSystem.store.storedEntry(for: url)).header.etag
        }
        let deadline = Date().addingTimeInterval(30)
        while try !storedETag().isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(try storedETag(), "", "a remount must not compare the rotating ETag")
        // A real change (another date) is still one.
        origin.lastModified = "Mon, 07 Nov 1994 08:49:37 GMT"
        XCTAssertEqual(read(handle, offset: 4_000_000, count: 100), .failure(.stale))
    }

    /// One other ETag for the same length and date, answered again when asked again: the file was replaced within
    /// the second, not a rotating server. It is a change, and no bytes of the two versions are mixed.
    func testAnotherETagTwiceIsAChange() throws {
        let handle = try openFile()
        origin.serve(url, bytes: pseudoRandomBytes(count: bytes.count, seed: 9), etag: "\"replaced\"")
        XCTAssertEqual(read(handle, offset: 3_000_000, count: 100), .failure(.stale))
        let ranged = origin.requests.filter { $0.range != nil }
        XCTAssertGreaterThanOrEqual(ranged.count, 2, "asked once more with its own ETag before deciding")
        XCTAssertTrue(ranged.allSatisfy { $0.ifRange == "\"v1\"" }, "never asked with the date")
        XCTAssertFalse(FileManager.default.fileExists(atPath: fileSystem.store.root + "/rotating-etags"))
    }

    /// A server known to rotate its ETags (kept in the cache directory): a remount's probe with another ETag finds
    /// the cached data, where it used to drop it.
    func testAServerKnownToRotateKeepsItsFilesCachedAcrossAProbe() throws {
        let handle = try openFile()
        origin.rotatesETags = true
        XCTAssertEqual(try read(handle, offset: 3_000_000, count: 100).get(), Array(bytes[3_000_000..<3_000_100]))
        fileSystem.store.waitForWrites()
        let kept = try XCTUnwrap(String(contentsOfFile: fileSystem.store.root + "/rotating-etags", encoding: .utf8))
        XCTAssertEqual(kept, "http://origin\n")
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        let cached = entry.cachedBytes
        XCTAssertGreaterThan(cached, 0)
        let fresh = RemoteMetadata(url: url, size: UInt64(bytes.count), etag: "\"node-99\"",
                                   lastModified: origin.lastModified)
        XCTAssertTrue(try fileSystem.store.entry(for: fresh, blockSize: 65536) === entry)
        XCTAssertFalse(entry.isStale)
    }

    func testLookupAndListing() throws {
        XCTAssertEqual(fileSystem.lookup(parent: Catalog.rootInode, name: "missing"), .failure(.notFound))
        XCTAssertEqual(try fileSystem.directoryContents(Catalog.rootInode).get().map(\.name), ["data.bin"])
        XCTAssertEqual(fileSystem.open(Catalog.rootInode), .failure(.isADirectory))
    }
}

/// Issue 16's background fill that tells a scan from a use (`--prefetch use`, the default).
final class FillPolicyTests: XCTestCase {
    let url = "http://origin/movie.mp4"
    let bytes = pseudoRandomBytes(count: 64 << 20)
    var directory: TemporaryDirectory!
    var origin: MemoryOrigin!
    var fileSystem: RangeFS!
    var entry: CacheEntry!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "fill")
        origin = MemoryOrigin()
        origin.serve(url, bytes: bytes)
        fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path, prefetch: .use)
        entry = try fileSystem.entry(for: try XCTUnwrap(fileSystem.catalog.items.first))
    }

    override func tearDown() {
        entry = nil
        fileSystem = nil
        origin = nil
        directory = nil
        super.tearDown()
    }

    func read(_ handle: UInt64, offset: Int, count: Int) {
        let result = fileSystem.readSynchronously(handle: handle, offset: UInt64(offset), count: count)
        guard case .success(let got) = result else { return XCTFail("read at \(offset) failed: \(String(describing: result))") }
        XCTAssertTrue(got.elementsEqual(bytes[offset..<(offset + count)]))
    }

    func testAProbeOfHeaderIndexAndAFewSeeksStartsNoFill() throws {
        let handle = try fileSystem.open(2).get().handle
        // What a media prober does: the header, the index at the end, then a few packets here and there.
        read(handle, offset: 0, count: 64 << 10)
        read(handle, offset: bytes.count - (1 << 20), count: 1 << 20)
        for fraction in [0.1, 0.25, 0.5, 0.75] {
            let offset = Int(Double(bytes.count) * fraction)
            read(handle, offset: offset, count: 128 << 10)
            read(handle, offset: offset + (128 << 10), count: 128 << 10)
        }
        fileSystem.release(handle)
        XCTAssertFalse(fileSystem.scheduler.isFilling(entry), "a probe must not start a whole-file download")
        usleep(300_000)
        XCTAssertLessThan(entry.cachedBytes, 8 << 20, "only what was read, and its readahead")
    }

    func testASequentialUseStartsTheFillWhichGoesOnAfterClose() throws {
        let handle = try fileSystem.open(2).get().handle
        // 30% of the file, read in order like a player or a copy, then closed.
        let stop = Int(Double(bytes.count) * 0.3)
        for offset in stride(from: 0, to: stop, by: 128 << 10) { read(handle, offset: offset, count: 128 << 10) }
        fileSystem.release(handle)
        let deadline = Date().addingTimeInterval(20)
        while !entry.isComplete && Date() < deadline { usleep(50_000) }
        XCTAssertTrue(entry.isComplete, "the fill completes a file that was used, after it is closed")
    }
}
