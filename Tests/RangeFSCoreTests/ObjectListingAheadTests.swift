import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
import Synchronization
import XCTest
@testable import RangeFSObjectStore

/// Issue 46: an object store's next page is asked as soon as the page before names it, while that page still
/// arrives, so the store makes one page while rangefs reads the other (the server's time and the parse's added up:
/// 1,000 pages for a million objects). The store here sends each page in two parts, the second held until an event
/// the test names has happened (never a timer): a listing that asked its pages one after the other would never see
/// that event, and the hold's long fallback would show in the log as a page sent whole before the next was asked.
final class ObjectListingAheadTests: XCTestCase {
    let access = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
    let bucketURL = "http://h:9000/bkt"

    /// Each page's second part is held until the next page is asked: every page is asked before the one before it
    /// has come whole, once, in order, and the listing holds every key in order.
    func testTheNextPageIsAskedWhileThePageBeforeStillArrives() throws {
        let store = SplitStore(pages: Self.pages(3, perPage: 400))
        store.hold("", until: "asked t400")
        store.hold("t400", until: "asked t800")
        let listing = try list(store)
        XCTAssertEqual(listing.entries.count, 1_200)
        XCTAssertEqual(listing.entries.map(\.name), (0..<1_200).map { String(format: "k-%05d", $0) })
        let events = store.events
        XCTAssertEqual(events.filter { $0.hasPrefix("asked") }, ["asked ", "asked t400", "asked t800"],
                       "each page asked once, in order")
        for (page, next) in [("", "t400"), ("t400", "t800")] {
            let asked = try XCTUnwrap(events.firstIndex(of: "asked \(next)"))
            let whole = try XCTUnwrap(events.firstIndex(of: "whole \(page)"))
            XCTAssertLessThan(asked, whole, "page \(next) asked before page '\(page)' came whole: \(events)")
        }
    }

    /// Pages asked ahead may come whole before the page before them: they wait their turn, and the listing is
    /// read in page order.
    func testPagesThatComeBeforeTheirTurnAreReadInOrder() throws {
        let store = SplitStore(pages: Self.pages(3, perPage: 300))
        store.hold("", until: "whole t300")
        store.hold("t300", until: "whole t600")
        let listing = try list(store)
        XCTAssertEqual(listing.entries.map(\.name), (0..<900).map { String(format: "k-%05d", $0) })
        let events = store.events
        XCTAssertEqual(events.filter { $0.hasPrefix("whole") }, ["whole t600", "whole t300", "whole "],
                       "the last page came first, the first last")
        XCTAssertEqual(events.filter { $0.hasPrefix("asked") }.count, 3, "each page asked once")
    }

    /// A token found ahead that the page's parse does not confirm (here one inside an element the parse skips) is
    /// a guess: its page is asked, its answer (an error) dropped, and the page the parse names is asked and read.
    func testATokenTheParseDoesNotConfirmIsDroppedAndTheRightPageAsked() throws {
        var pages = Self.pages(2, perPage: 100)
        let first = String(decoding: pages[""]!, as: UTF8.self)
        pages[""] = Array(first.replacingOccurrences(
            of: "<IsTruncated>", with: "<Owner><NextContinuationToken>bogus</NextContinuationToken></Owner><IsTruncated>")
            .utf8)
        let store = SplitStore(pages: pages)
        let listing = try list(store)
        XCTAssertEqual(listing.entries.map(\.name), (0..<200).map { String(format: "k-%05d", $0) })
        let asked = store.events.filter { $0.hasPrefix("asked") }
        XCTAssertEqual(asked.filter { $0 != "asked bogus" }, ["asked ", "asked t100"], "each real page asked once")
        XCTAssertLessThanOrEqual(asked.filter { $0 == "asked bogus" }.count, 1, "the guess asked at most once")
    }

    /// The scan finds a token split across the parts a page arrives in, and only once the element is whole; a
    /// token holding an entity or markup is no guess.
    func testTheScanFindsATokenSplitAcrossPartsAndRefusesEntities() {
        let page = Array(("<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>ab+/=c"
                          + "</NextContinuationToken><Contents>").utf8)
        for cut in 1..<page.count {
            var scan = ContinuationScan()
            let early = scan.token(in: Array(page[..<cut]))
            let whole = scan.token(in: page)
            XCTAssertEqual(early ?? whole, "ab+/=c", "cut at \(cut)")
            XCTAssertFalse(early != nil && whole != nil, "given once, cut at \(cut)")
            XCTAssertTrue(scan.isDone)
        }
        var entity = ContinuationScan()
        XCTAssertNil(entity.token(in: Array("<NextContinuationToken>a&amp;b</NextContinuationToken>".utf8)))
        XCTAssertTrue(entity.isDone, "no guess: the parse decides")
        var none = ContinuationScan()
        XCTAssertNil(none.token(in: Array("<ListBucketResult><IsTruncated>false</IsTruncated>".utf8)))
        XCTAssertFalse(none.isDone)
    }

    /// `count` pages of `perPage` keys `d/k-NNNNN` each, by the token they are asked with ("" for the first):
    /// page i's token is `t` and the index of its first key.
    static func pages(_ count: Int, perPage: Int) -> [String: [UInt8]] {
        var pages: [String: [UInt8]] = [:]
        for page in 0..<count {
            let start = page * perPage
            let more = page + 1 < count
            var text = "<ListBucketResult><Name>bkt</Name><Prefix>d/</Prefix><IsTruncated>\(more)</IsTruncated>"
            if more { text += "<NextContinuationToken>t\(start + perPage)</NextContinuationToken>" }
            for key in start..<(start + perPage) {
                text += "<Contents><Key>d/k-\(String(format: "%05d", key))</Key><Size>1</Size>"
                    + "<LastModified>2026-11-01T10:00:00.000Z</LastModified><ETag>&quot;e\(key)&quot;</ETag></Contents>"
            }
            pages[page == 0 ? "" : "t\(start)"] = Array((text + "</ListBucketResult>").utf8)
        }
        return pages
    }

    private func list(_ store: SplitStore) throws -> ParsedListing {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<[UInt8], FetchError>?>(nil)
        store.fetchObjectListing("http://h:9000/bkt/d/", access: access, limit: 64 << 20, timeout: 600) { answer in
            result.withLock { $0 = answer }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 600), .success)
        let body = try (result.withLock { $0 } ?? .failure(.cancelled)).get()
        return DirectoryListing.parse(body, base: "http://h:9000/bkt/d/")
    }
}

/// A store that answers ListObjectsV2 pages from memory, each in two parts: the bytes up to the end of its
/// `</NextContinuationToken>` (or of `</IsTruncated>`), then the rest once the event its hold names has happened.
/// A token it does not hold is answered 500. `events` records `asked TOKEN` when a page is asked and `whole TOKEN`
/// when it was sent whole.
private final class SplitStore: RangeFetching, @unchecked Sendable {
    // @unchecked Sendable: `pages` is set at init; `recorded` and `holds` are read and written under `condition`.
    let pages: [String: [UInt8]]
    private let condition = NSCondition()
    private var recorded: [String] = []
    private var holds: [String: String] = [:]
    /// How long a hold waits for its event before sending anyway: only a listing that never asks ahead waits it
    /// out, and the events then show the failure.
    static let fallbackSeconds = 60.0

    init(pages: [String: [UInt8]]) {
        self.pages = pages
    }

    func hold(_ token: String, until event: String) {
        locked { holds[token] = event }
    }

    var events: [String] { locked { recorded } }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    func start(_ request: RangeRequest, sink: any RangeResponseSink) {
        let token = request.url.components(separatedBy: "continuation-token=").dropFirst().first
            .flatMap { $0.components(separatedBy: "&").first?.removingPercentEncoding } ?? ""
        note("asked \(token)")
        DispatchQueue.global().async { [self] in
            guard let page = pages[token] else {
                let body = Array("<Error><Code>InternalError</Code></Error>".utf8)
                _ = sink.receive(head: ResponseHead(status: 500, headers: ["content-length": "\(body.count)"]))
                _ = body.withUnsafeBytes { sink.receive(body: $0) }
                return sink.complete(error: nil)
            }
            let text = String(decoding: page, as: UTF8.self)
            let marker = text.range(of: "</NextContinuationToken>") ?? text.range(of: "</IsTruncated>")!
            let split = text.utf8.distance(from: text.startIndex, to: marker.upperBound)
            _ = sink.receive(head: ResponseHead(status: 200, headers: ["content-length": "\(page.count)"]))
            _ = Array(page[..<split]).withUnsafeBytes { sink.receive(body: $0) }
            if let event = locked({ holds[token] }) { wait(for: event) }
            _ = Array(page[split...]).withUnsafeBytes { sink.receive(body: $0) }
            note("whole \(token)")
            sink.complete(error: nil)
        }
    }

    private func note(_ event: String) {
        locked {
            recorded.append(event)
            condition.broadcast()
        }
    }

    /// Waits until `event` has happened, woken by each new event.
    private func wait(for event: String) {
        let giveUp = Date(timeIntervalSinceNow: Self.fallbackSeconds)
        condition.lock()
        defer { condition.unlock() }
        while !recorded.contains(event), condition.wait(until: giveUp) {}
    }

    func pauseBackground(_ paused: Bool) {}

    func wake() {}

    func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        completion(.failure(.httpStatus(404)))
    }
}
