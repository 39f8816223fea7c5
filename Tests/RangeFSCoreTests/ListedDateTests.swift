import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46, "a listing is a check when it can be" (ListedDate.swift): a web server's listing that states a cached
/// file's size, and a date that, rounded up to the listing's precision, is no later than when the server answered
/// with the cached version (its Date, kept in the entry's header), is a check of that version. The rule itself,
/// the header that keeps the moment, and remounts of a `RangeFS` over a `MemoryOrigin` (no FUSE).
final class ListedDateTests: XCTestCase {
    let origin = MemoryOrigin()
    var directory: TemporaryDirectory!
    let bytes = pseudoRandomBytes(count: 100_000, seed: 46)
    let root = "http://web/d/"
    /// 25 Nov 2026 10:00:00 GMT, the minute every listing here states.
    static let tenOClock: Int64 = 1_795_600_800

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "listed-date")
        XCTAssertEqual(HTTPDate.format(Self.tenOClock), "Wed, 25 Nov 2026 10:00:00 GMT")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    // MARK: The rule

    /// A listed file of 1,000 bytes stating `time` to `precision`.
    func listedItem(_ time: Int64?, _ precision: ListedPrecision) -> CatalogItem {
        var item = CatalogItem(inode: 2, name: "a.bin", metadata: RemoteMetadata(url: root + "a.bin", size: 1_000,
                                                                                 etag: "", lastModified: ""),
                               listed: true, validated: false, attributesExact: true)
        item.listedTime = time
        item.listedPrecision = precision
        return item
    }

    /// A cached version of 1,000 bytes (`size`) modified at `modified`, which its server answered with at
    /// `answered`.
    func version(modified: Int64, answered: Int64?, size: UInt64 = 1_000) -> RemoteMetadata {
        var version = RemoteMetadata(url: root + "a.bin", size: size, etag: "\"e\"",
                                     lastModified: HTTPDate.format(modified))
        version.answeredAt = answered
        return version
    }

    func testAListedDateIsRoundedUpToItsPrecision() {
        let minute = listedItem(Self.tenOClock, .minute), at = Self.tenOClock + 30
        XCTAssertFalse(minute.listingShowsUnchanged(version(modified: at, answered: at + 29)),
                       "10:00 may be 10:00:59, after F")
        XCTAssertTrue(minute.listingShowsUnchanged(version(modified: at, answered: Self.tenOClock + 60)),
                      "10:00 ends at 10:01:00 = F")
        XCTAssertTrue(minute.listingShowsUnchanged(version(modified: at, answered: Self.tenOClock + 3600)))
        let second = listedItem(Self.tenOClock, .second)
        XCTAssertFalse(second.listingShowsUnchanged(version(modified: Self.tenOClock, answered: Self.tenOClock)),
                       "10:00:00 may be 10:00:00.5, after F")
        XCTAssertTrue(second.listingShowsUnchanged(version(modified: Self.tenOClock, answered: Self.tenOClock + 1)))
    }

    func testNothingIsProvedWithoutAMomentOrADateOrWithADateAfterIt() {
        let late = Self.tenOClock + 3600
        XCTAssertFalse(listedItem(Self.tenOClock, .second).listingShowsUnchanged(version(modified: Self.tenOClock,
                                                                                       answered: nil)), "F unknown")
        XCTAssertFalse(listedItem(nil, .second).listingShowsUnchanged(version(modified: Self.tenOClock, answered: late)),
                       "no listed date")
        XCTAssertFalse(listedItem(Self.tenOClock + 120, .minute)
            .listingShowsUnchanged(version(modified: Self.tenOClock + 120, answered: Self.tenOClock + 60)),
                       "a date after F")
        XCTAssertFalse(listedItem(Self.tenOClock, .second).listingShowsUnchanged(version(modified: Self.tenOClock,
                                                                                       answered: late, size: 999)),
                       "another size")
        XCTAssertFalse(listedItem(Self.tenOClock, .second).listingShowsUnchanged(version(modified: Self.tenOClock + 5,
                                                                                       answered: late)),
                       "a cached date outside the listed second: another version")
        XCTAssertFalse(listedItem(Int64.max, .minute).listingShowsUnchanged(version(modified: Self.tenOClock,
                                                                                  answered: Int64.max)), "no overflow")
        var unstated = listedItem(Self.tenOClock, .minute)
        unstated.attributesExact = false
        XCTAssertFalse(unstated.listingShowsUnchanged(version(modified: Self.tenOClock, answered: late)),
                       "a listing without the size")
    }

    func testListingsStateTheirPrecision() throws {
        let html = "<a href=\"a.bin\">a.bin</a>  25-Nov-2026 10:00  100000\n"
        XCTAssertEqual(DirectoryListing.parse(Array(html.utf8), base: root).entries.first?.datePrecision, .minute)
        let json = #"[{"name":"a.bin","type":"file","size":100000,"mtime":"Wed, 25 Nov 2026 10:00:00 GMT"}]"#
        XCTAssertEqual(DirectoryListing.parse(Array(json.utf8), base: root).entries.first?.datePrecision, .second)
    }

    // MARK: The header keeps the moment

    func testTheHeaderKeepsTheMomentAndReadsVersionOneAsUnknown() throws {
        var header = CacheHeader(blockSize: 65536, size: 100_000, generation: 9, url: root + "a.bin", etag: "\"e\"",
                                 lastModified: "Wed, 25 Nov 2026 10:00:30 GMT")
        header.answeredAt = Self.tenOClock + 300
        XCTAssertEqual(try CacheHeader.decode(header.encoded()), header)
        XCTAssertEqual(try CacheHeader.decode(header.encoded()).remoteMetadata.answeredAt, Self.tenOClock + 300)
        header.answeredAt = nil
        XCTAssertEqual(try CacheHeader.decode(header.encoded()), header, "unknown stays unknown")

        // A version 1 header, as rangefs wrote it before: the same fields without the moment.
        var writer = ByteWriter()
        writer.write(raw: Array("RFSHEAD1".utf8))
        writer.write(UInt32(1))
        writer.write(UInt32(65536))
        writer.write(UInt64(100_000))
        writer.write(UInt64(9))
        for text in [root + "a.bin", "\"e\"", "Wed, 25 Nov 2026 10:00:30 GMT"] { writer.write(string: text) }
        writer.write(CRC32C.checksum(writer.bytes))
        let old = try CacheHeader.decode(writer.bytes)
        XCTAssertEqual(old, header, "a version 1 header reads, its moment unknown")
        XCTAssertNil(old.answeredAt)
        XCTAssertThrowsError(try CacheHeader.decode(Array(writer.bytes.dropLast(4)) + [0, 0, 0, 0]),
                             "its CRC is checked")
    }

    // MARK: A remount

    /// Serves `a.bin` and the listing of `root`: nginx's HTML (dates to the minute) or its JSON (to the second),
    /// stating `listed`; the file's own answers state Last-Modified `modified` and, if given, Date `answered`.
    func serve(html: Bool, listed: Int64, modified: Int64, answered: Int64?) {
        let date = HTTPDate.format(listed)
        let listing = html
            ? "<html><body><pre><a href=\"../\">../</a>\n<a href=\"a.bin\">a.bin</a>"
                + "   \(nginxHTMLDate(listed))   \(bytes.count)\n</pre></body></html>\n"
            : #"[{"name":"a.bin","type":"file","size":\#(bytes.count),"mtime":"\#(date)"}]"#
        origin.serve(root, bytes: Array(listing.utf8))
        origin.serve(root + "a.bin", bytes: bytes, etag: "\"e1\"")
        origin.lastModified = HTTPDate.format(modified)
        origin.extraHeaders = answered.map { ["date": HTTPDate.format($0)] } ?? [:]
    }

    /// `time` as nginx's HTML autoindex writes it: `25-Nov-2026 10:00`.
    func nginxHTMLDate(_ time: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "dd-MMM-yyyy HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }

    /// A mount of `root` on this test's cache with the default `--revalidate`; `body` runs with it.
    func mounted(_ body: (RangeFS) throws -> Void) throws {
        // The next mount takes the cache's lock, which this store holds until it is gone (`withFileSystem`).
        let released = try withFileSystem({
            try makeTestFileSystem(origin: origin, urls: [], directory: directory.path, root: root,
                                   kernel: KernelRecorder()) { settings in
                settings.revalidateAfter = FileSystemSettings().revalidateAfter  // the default: its check is the point
            }
        }, body)
        XCTAssertTrue(released, "the mount's store was released")
    }

    /// Opens `a.bin`, reads it whole (checking its bytes), and closes it.
    func readWhole(_ fileSystem: RangeFS) throws {
        let inode = try fileSystem.lookup(parent: Catalog.rootInode, name: "a.bin").get().inode
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 0, count: bytes.count)?.get(), bytes)
        fileSystem.release(handle)
    }

    /// Reads `a.bin` whole on one mount, then again on a second mount of the same cache: whether that second
    /// read started the open's background check against the server (its probe, counted by the origin). With no
    /// check, the second mount asked for nothing but the listing.
    func remountChecks() throws -> Bool {
        try mounted { try readWhole($0) }
        return try mountChecks()
    }

    /// Mounts the cache and reads `a.bin` whole: whether that read started the open's background check. With
    /// `keeping`, waits (up to 30 s) until the entry's header keeps that moment before the mount ends.
    func mountChecks(keeping moment: Int64? = nil) throws -> Bool {
        var checked = false
        try mounted { fileSystem in
            let (probes, requests) = (origin.probeCount, origin.requests.count)
            try readWhole(fileSystem)
            fileSystem.revalidator.work.sync(flags: .barrier) {}
            checked = origin.probeCount > probes
            if !checked {
                XCTAssertEqual(origin.requests.dropFirst(requests).map(\.url).filter { $0 != root }, [],
                               "no request for the file")
            }
            guard let moment else { return }
            // Not written yet: asked again.
            func kept() -> Int64? { fileSystem.store.storedEntry(for: root + "a.bin")?.header.answeredAt }
            let deadline = Date().addingTimeInterval(30)
            while kept() != moment, Date() < deadline { usleep(10_000) }
            XCTAssertEqual(kept(), moment, "the header keeps the moment of the check's answer")
        }
        return checked
    }

    /// The case of issue 46: nginx's HTML states the minute of a file changed long before it was fetched.
    func testAnHTMLListingDatedBeforeTheFetchIsTheCheck() throws {
        serve(html: true, listed: Self.tenOClock, modified: Self.tenOClock + 30, answered: Self.tenOClock + 600)
        XCTAssertFalse(try remountChecks(), "the remount's open sent its background check, though the listing is one")
    }

    /// A file fetched within the minute its listing states may have changed after the fetch: it is checked.
    func testAnHTMLListingOfTheFetchsMinuteIsNoCheck() throws {
        serve(html: true, listed: Self.tenOClock, modified: Self.tenOClock + 30, answered: Self.tenOClock + 45)
        XCTAssertTrue(try remountChecks(), "a file modified in the minute it was fetched in went unchecked")
    }

    /// Without the server's Date, the moment of the fetch is unknown: the check runs as before.
    func testWithoutTheServersDateTheCheckRuns() throws {
        serve(html: true, listed: Self.tenOClock, modified: Self.tenOClock + 30, answered: nil)
        XCTAssertTrue(try remountChecks(), "a fetch of unknown moment counted as checked by a listing")
    }

    /// A header that keeps no moment (a cache made before headers kept it, or a server that sent no Date then):
    /// the file is checked, that check's dated answer is written to the header, and the next mount needs none.
    func testACheckGivesAHeaderWithoutAMomentItsMoment() throws {
        serve(html: true, listed: Self.tenOClock, modified: Self.tenOClock + 30, answered: nil)
        try mounted { try readWhole($0) }
        origin.extraHeaders = ["date": HTTPDate.format(Self.tenOClock + 600)]
        XCTAssertTrue(try mountChecks(keeping: Self.tenOClock + 600), "a version of unknown moment went unchecked")
        XCTAssertFalse(try mountChecks(), "the moment its check kept did not make the listing the check")
    }

    /// nginx's JSON states the second: a second after it is enough, the same second is not.
    func testAJSONListingIsRoundedToTheSecond() throws {
        serve(html: false, listed: Self.tenOClock, modified: Self.tenOClock, answered: Self.tenOClock + 1)
        XCTAssertFalse(try remountChecks(), "a JSON listing dated a second before the fetch was no check")
    }

    func testAJSONListingOfTheFetchsSecondIsNoCheck() throws {
        serve(html: false, listed: Self.tenOClock, modified: Self.tenOClock, answered: Self.tenOClock)
        XCTAssertTrue(try remountChecks(), "a file modified in the second it was fetched in went unchecked")
    }
}
