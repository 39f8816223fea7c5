@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
import Synchronization
import XCTest

/// The detector and window of DirectoryPrefetch, and the depth LinkEstimate gives, without a network: the files it
/// asks to fetch are recorded, and a fetch ends when the test says so.
final class DirectoryPrefetchCoreTests: XCTestCase {
    /// A directory of `count` listed files (`f000.bin`...) of `size` bytes each.
    func directory(count: Int, size: UInt64 = 20_000) -> (Catalog, [CatalogItem]) {
        let catalog = Catalog()
        let folder = catalog.addDirectory(url: "http://origin/d/")
        let items = (0..<count).map { index in
            catalog.add(RemoteMetadata(url: "http://origin/d/" + String(format: "f%03d.bin", index), size: size,
                                       etag: "", lastModified: ""),
                        parent: folder.inode, listed: true, validated: false)
        }
        return (catalog, items)
    }

    final class Recorder: Sendable {
        let fetched = Mutex<[String]>([])
        let pending = Mutex<[@Sendable () -> Void]>([])
        func finishAll() {
            let done = pending.withLock { pending in defer { pending = [] }; return pending }
            done.forEach { $0() }
        }
    }

    func prefetcher(_ catalog: Catalog, _ recorder: Recorder, limits: DirectoryPrefetch.Limits = .init())
        -> DirectoryPrefetch {
        DirectoryPrefetch(catalog: catalog, link: LinkEstimate(), limits: limits, probeBytes: 256 << 10) { file, done in
            recorder.fetched.withLock { $0.append(file.name) }
            recorder.pending.withLock { $0.append(done) }
        }
    }

    func testThreeOpensInOrderFetchTheNextFilesAndUsedGuessesGrowTheWindow() {
        let (catalog, items) = directory(count: 100)
        let recorder = Recorder()
        let prefetch = prefetcher(catalog, recorder)
        prefetch.opened(items[0])
        prefetch.opened(items[1])
        XCTAssertEqual(recorder.fetched.withLock { $0 }, [], "two opens are no stream yet")
        prefetch.opened(items[2])
        XCTAssertEqual(recorder.fetched.withLock { $0 }, ["f003.bin", "f004.bin", "f005.bin", "f006.bin"],
                       "the first window: 4 files")
        recorder.finishAll()
        for index in 3..<7 { prefetch.opened(items[index]) }
        // Each guess used grows the window by one, and the frontier moved 4 files: 8 files ahead of f006.
        XCTAssertEqual(recorder.fetched.withLock { $0.count }, 4 + 8)
        XCTAssertEqual(recorder.fetched.withLock { $0.last }, "f014.bin")
        XCTAssertEqual(prefetch.counts.used, 4)
    }

    func testAReaderThatJumpsTriggersNothingAndAJumpStartsAStreamOfItsOwn() {
        let (catalog, items) = directory(count: 200)
        let recorder = Recorder()
        let prefetch = prefetcher(catalog, recorder)
        for step in 0..<50 { prefetch.opened(items[step * 37 % 200]) }
        XCTAssertEqual(recorder.fetched.withLock { $0 }, [])
        // Among the cursors those jumps left, a reader in order starts fetching by its fourth open in order (its
        // third, if its first continued a cursor a jump left), the files right after its own.
        for index in 120..<124 { prefetch.opened(items[index]) }
        let started = recorder.fetched.withLock { $0 }
        XCTAssertTrue([["f123.bin", "f124.bin", "f125.bin", "f126.bin", "f127.bin", "f128.bin"],
                       ["f124.bin", "f125.bin", "f126.bin", "f127.bin"]].contains(started), "\(started)")
        recorder.finishAll()
        prefetch.opened(items[10])  // a jump back
        prefetch.opened(items[150])  // and forward
        XCTAssertEqual(recorder.fetched.withLock { $0 }, started, "nothing new after a jump")
    }

    /// One reader opening files at random among 1,000 (a shuffled loader) leaves up to `readers` cursors behind,
    /// and each open lands near one of them now and then: it still triggers nothing.
    func testRandomOpensAmongManyCursorsTriggerNothing() {
        let (catalog, items) = directory(count: 1000)
        let recorder = Recorder()
        let prefetch = prefetcher(catalog, recorder)
        var random = SplitMix(seed: 46)
        for index in (0..<1000).shuffled(using: &random).prefix(400) { prefetch.opened(items[index]) }
        XCTAssertEqual(recorder.fetched.withLock { $0 }, [])
    }

    struct SplitMix: RandomNumberGenerator {
        var seed: UInt64
        mutating func next() -> UInt64 {
            seed &+= 0x9E37_79B9_7F4A_7C15
            var value = (seed ^ (seed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
            return value ^ (value >> 31)
        }
    }

    /// `xargs -P 8 -n 20 cat` over 400 files: 8 readers, each given the next 20 files when its last batch ends,
    /// taking turns to open a file. Each is followed on its own: most files are asked for before their open, none
    /// twice, and nothing is fetched that no reader then opens. Main took every open for a jump: nothing ahead.
    func testEightReadersTwentyFilesApartAreEachFetchedAhead() {
        let (catalog, items) = directory(count: 400)
        let recorder = Recorder()
        let prefetch = prefetcher(catalog, recorder)
        var batches = (0..<20).map { batch in Array(batch * 20..<batch * 20 + 20) }
        var readers = (0..<8).map { _ in batches.removeFirst() }
        var fetchedBeforeOpen = 0
        var opened = Set<String>()
        while readers.contains(where: { !$0.isEmpty }) {
            for reader in readers.indices where !readers[reader].isEmpty {
                let item = items[readers[reader].removeFirst()]
                if recorder.fetched.withLock({ $0.contains(item.name) }) { fetchedBeforeOpen += 1 }
                prefetch.opened(item)
                catalog.update(inode: item.inode, metadata: item.metadata)  // its open's probe
                opened.insert(item.name)
                if readers[reader].isEmpty, !batches.isEmpty { readers[reader] = batches.removeFirst() }
            }
            // The fetches ahead end before the next round of opens (a fast link); what they fetched is validated.
            for name in recorder.fetched.withLock({ $0 }) {
                let item = items[Int(name.dropFirst().prefix(3))!]
                catalog.update(inode: item.inode, metadata: item.metadata)
            }
            recorder.finishAll()
        }
        let fetched = recorder.fetched.withLock { $0 }
        XCTAssertEqual(Set(fetched).count, fetched.count, "a file fetched ahead twice: \(fetched)")
        XCTAssertEqual(Set(fetched).subtracting(opened).sorted(), [], "fetched ahead, never opened")
        XCTAssertGreaterThanOrEqual(fetchedBeforeOpen, 400 * 3 / 4, "files fetched before their open, of 400")
        XCTAssertEqual(fetchedBeforeOpen, fetched.count, "every file fetched ahead was fetched before its open")
        print("8 readers: \(fetchedBeforeOpen) of 400 files fetched before their open")
    }

    /// Two readers splitting a directory (`xargs -P 2`: their opens a little out of order), and a reader taking
    /// every other file (`*.jpg` of a folder of jpg and txt pairs): both are in order.
    func testReadersSplittingADirectoryOrSkippingFilesCountAsInOrder() {
        let (catalog, items) = directory(count: 100)
        let recorder = Recorder()
        let prefetch = prefetcher(catalog, recorder)
        for index in [0, 1, 3, 2, 5, 4] { prefetch.opened(items[index]) }
        let split = recorder.fetched.withLock { $0 }
        XCTAssertFalse(split.isEmpty, "two readers splitting the directory")
        XCTAssertFalse(split.contains { ["f000.bin", "f001.bin", "f002.bin", "f003.bin"].contains($0) },
                       "nothing behind the frontier: \(split)")
        let (skipping, files) = directory(count: 100)
        let skipper = Recorder()
        let every = prefetcher(skipping, skipper)
        for index in stride(from: 0, to: 8, by: 2) { every.opened(files[index]) }
        XCTAssertFalse(skipper.fetched.withLock { $0 }.isEmpty, "a reader taking every other file")
    }

    func testFetchesInFlightAndBytesAheadStayWithinTheirCaps() {
        let (catalog, items) = directory(count: 300, size: 200 << 10)
        let recorder = Recorder()
        var limits = DirectoryPrefetch.Limits()
        limits.inFlight = 3
        limits.bytesAhead = 5 * (200 << 10)
        let prefetch = prefetcher(catalog, recorder, limits: limits)
        for index in 0..<3 { prefetch.opened(items[index]) }
        XCTAssertEqual(recorder.fetched.withLock { $0.count }, 3, "three in flight at most")
        recorder.finishAll()
        XCTAssertEqual(recorder.fetched.withLock { $0.count }, 4, "then the window (4) is full")
        recorder.finishAll()
        for index in 3..<7 { prefetch.opened(items[index]) }
        recorder.finishAll()
        recorder.finishAll()
        XCTAssertLessThanOrEqual(recorder.fetched.withLock { $0.count } - 4, 5, "5 files' bytes ahead at most")
    }

    // A copy stopped midway leaves files fetched ahead that nobody opens: once its directory is idle for
    // `idleTime`, their bytes go back to the mount's budget, and another directory is fetched ahead again.
    func testADirectoryLeftMidwayGivesBackItsBudget() {
        let catalog = Catalog()
        var items: [String: [CatalogItem]] = [:]
        for folder in ["a", "b"] {
            let directory = catalog.addDirectory(url: "http://origin/\(folder)/")
            items[folder] = (0..<40).map { index in
                catalog.add(RemoteMetadata(url: "http://origin/\(folder)/" + String(format: "f%03d.bin", index),
                                           size: 200 << 10, etag: "", lastModified: ""),
                            parent: directory.inode, listed: true, validated: false)
            }
        }
        let recorder = Recorder()
        var limits = DirectoryPrefetch.Limits()
        limits.bytesAhead = 4 * (200 << 10)
        limits.idleTime = .zero
        let prefetch = prefetcher(catalog, recorder, limits: limits)
        for index in 0..<3 { prefetch.opened(items["a"]![index]) }
        recorder.finishAll()
        XCTAssertEqual(recorder.fetched.withLock { $0.count }, 4, "a's window fills the byte budget")
        // The reader of a stopped; one of b comes. Before, a's 4 files held the budget for good: b got nothing.
        for index in 0..<3 { prefetch.opened(items["b"]![index]) }
        let fetchedForB = recorder.fetched.withLock { $0.count } - 4
        XCTAssertGreaterThan(fetchedForB, 0, "a directory left midway kept the budget: \(recorder.fetched.withLock { $0 })")
    }

    func testTheDepthFollowsBandwidthTimesRoundTrip() {
        let link = LinkEstimate()
        let url = "http://user:secret@Origin:8080/d/f.bin"
        XCTAssertEqual(LinkEstimate.origin(of: url), "http://origin:8080")
        // Read as bytes: the authority's last `@` and its end at `/`, `?` or `#`; ASCII letters lowered, others
        // as Unicode lowers them; a text without `://` is its own key.
        let origins = ["https://a@b@HOST.Example/x": "https://host.example", "http://H:1?q=/a": "http://h:1",
                       "http://H#f/x": "http://h", "s3://Bucket": "s3://bucket", "http://ÉTÉ.fr/x": "http://été.fr",
                       "no scheme:/x": "no scheme:/x", "x:y://Z/w": "x:y://z", "http://": "http://"]
        for (given, expected) in origins { XCTAssertEqual(LinkEstimate.origin(of: given), expected, given) }
        XCTAssertEqual(link.depth(for: url, typicalBytes: 32 << 10, connections: 16, bounds: 2...64), 16,
                       "nothing measured: one file per connection")
        // 40 ms, 4 MiB/s per connection: 16 × 4 MiB/s × 0.04 s = 2.56 MiB in flight, 82 files of 32 KiB: capped.
        link.record(url: url, headAfter: 0.04, bodyBytes: 4 << 20, bodySeconds: 1)
        XCTAssertEqual(link.depth(for: url, typicalBytes: 32 << 10, connections: 16, bounds: 2...64), 64)
        // Loopback: 0.2 ms and 1 GiB/s per connection: 16 + 3.2 MiB ÷ 1 MiB files = 20.
        let near = "http://127.0.0.1/x"
        link.record(url: near, headAfter: 0.0002, bodyBytes: 1 << 30, bodySeconds: 1)
        XCTAssertEqual(link.depth(for: near, typicalBytes: 1 << 20, connections: 16, bounds: 2...64), 20)
    }
}
