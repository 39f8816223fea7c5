import Dispatch
import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 36: the probe of a listed file being opened (FirstBytes.swift) answers the open at its head; a READ of the
/// bytes it still brings waits for them from that same transfer, and no second request asks for them.
final class FirstBytesTests: XCTestCase {
    /// Forwards a transfer's calls, but holds everything after the first `gateAfter` body bytes of a request from
    /// byte 0 of `url` until `gate` is signalled (as a server would that sent the head and first block at once).
    final class GatedSink: RangeResponseSink, @unchecked Sendable {
        // @unchecked Sendable: the origin calls it from one thread at a time, in order.
        let inner: RangeResponseSink
        let gate: DispatchSemaphore
        var forwarded = 0
        let gateAfter: Int

        init(_ inner: RangeResponseSink, gate: DispatchSemaphore, after: Int) {
            self.inner = inner
            self.gate = gate
            gateAfter = after
        }

        func receive(head: ResponseHead) -> Bool { inner.receive(head: head) }

        func receive(body: UnsafeRawBufferPointer) -> Bool {
            if forwarded >= gateAfter {
                gate.wait()
                gate.signal()
            }
            forwarded += body.count
            return inner.receive(body: body)
        }

        func complete(error: FetchError?) { inner.complete(error: error) }
    }

    struct GatedOrigin: RangeFetching {
        let inner: MemoryOrigin
        let url: String
        let gate = DispatchSemaphore(value: 0)

        func start(_ request: RangeRequest, sink: RangeResponseSink) {
            let gated = request.url == url && request.range?.lowerBound == 0
            inner.start(request, sink: gated ? GatedSink(sink, gate: gate, after: 64 << 10) : sink)
        }

        func pauseBackground(_ paused: Bool) { inner.pauseBackground(paused) }
        func wake() { inner.wake() }
        func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
            inner.probe(url: url, completion: completion)
        }
    }

    let base = "http://origin/dir/"
    let bytes = pseudoRandomBytes(count: 1 << 20, seed: 9)
    var directory: TemporaryDirectory!

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// A file system of one listed directory holding `c.bin` (1 MiB), listed; returns it and `c.bin`'s inode.
    func listedFile(on origin: RangeFetching, memory: MemoryOrigin) throws -> (RangeFS, UInt64) {
        memory.serve(base, bytes: Array(#"<a href="c.bin">c.bin</a>"#.utf8))
        memory.serve(base + "c.bin", bytes: bytes)
        directory = try TemporaryDirectory(prefix: "first-bytes")
        let logger = Logger(label: "test")
        let catalog = Catalog()
        catalog.setRootURL(base)
        var settings = FileSystemSettings()
        settings.revalidateAfter = nil
        let reports = EventQueue<EntryEvent>()
        let fileSystem = RangeFS(catalog: catalog,
                                 store: try CacheStore(root: directory.path, reports: reports, logger: logger),
                                 scheduler: FetchScheduler(fetcher: origin, events: FetchScheduler.Events(reports: reports), logger: logger),
                                 reports: reports, settings: settings, logger: logger)
        _ = try fileSystem.directoryContents(Catalog.rootInode).get()
        return (fileSystem, try XCTUnwrap(fileSystem.catalog.node(named: "c.bin", in: Catalog.rootInode)).inode)
    }

    func testTheOpenAnswersAtTheProbesHeadAndAReadOfItsLastBlockWaitsForTheSameTransfer() throws {
        let memory = MemoryOrigin()
        let origin = GatedOrigin(inner: memory, url: base + "c.bin")
        defer { origin.gate.signal() }
        let (fileSystem, inode) = try listedFile(on: origin, memory: memory)

        let opened = DispatchSemaphore(value: 0)
        let handle = LockedBox<UInt64?>(nil)
        fileSystem.open(inode) { result in
            handle.withLock { $0 = try? result.get().handle }
            opened.signal()
        }
        // A deadline for a hang only: before, the open waited for the whole probe, held by the gate.
        XCTAssertEqual(opened.wait(timeout: .now() + 10), .success, "the open answered at the probe's head")
        let opening = try XCTUnwrap(handle.withLock { $0 })
        XCTAssertEqual(try fileSystem.readSynchronously(handle: opening, offset: 0, count: 1000)?.get(),
                       Array(bytes.prefix(1000)), "the first block came with the head")

        let last = LockedBox<Result<[UInt8], FileSystemError>?>(nil)
        let answered = DispatchSemaphore(value: 0)
        fileSystem.read(handle: opening, offset: 200_000, count: 1000) { reply in
            last.withLock { $0 = reply.map { $0.bytesForTesting() } }
            answered.signal()
        }
        XCTAssertNil(last.withLock { $0 }, "the probe's last block is still held")
        origin.gate.signal()
        XCTAssertEqual(answered.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(try last.withLock { $0 }?.get(), Array(bytes[200_000..<201_000]))
        fileSystem.release(opening)
        XCTAssertEqual(memory.requests.filter { $0.url == base + "c.bin" }.map(\.range),
                       [0..<UInt64(FileSystemSettings().openProbeBytes)], "one request: the probe's")
    }

    /// A probe whose connection drops after its head and 100,000 bytes of its body: the rest of its bytes come from
    /// one request that goes on from the byte where it broke (with the probe's validator as If-Range), as for any
    /// fetch of the entry. Before, the probe kept its first whole block, and a read of the rest asked for it anew.
    func testAProbeCutMidwayGoesOnFromTheByteWhereItBroke() throws {
        let memory = MemoryOrigin()
        let (fileSystem, inode) = try listedFile(on: memory, memory: memory)
        memory.dropAfterBytes = 100_000
        memory.dropsLeft = 1
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 150_000, count: 100_000)?.get(),
                       Array(bytes[150_000..<250_000]))
        fileSystem.release(handle)
        let requests = memory.requests.filter { $0.url == base + "c.bin" }
        XCTAssertEqual(requests.map(\.range), [0..<UInt64(FileSystemSettings().openProbeBytes),
                                               100_000..<UInt64(FileSystemSettings().openProbeBytes)])
        XCTAssertNotNil(requests.last?.ifRange, "the rest asks for the version the probe saw")
    }

    /// Issue 38: a server that answers the probe's Range with 200 and only the range, with its Content-Range
    /// (`rclone serve s3`). The file's size is the Content-Range's total, the open answers at the head, and the
    /// probe's bytes go on streaming into the file's first blocks as a 206's do: a read of them sends no request.
    /// Read as the whole file, the size was the probe's 256 KiB.
    func testAProbeAnsweredWith200AndTheRangeAskedIsReadAsThatRange() throws {
        let memory = MemoryOrigin()
        memory.answersRangesWith200 = true
        let (fileSystem, inode) = try listedFile(on: memory, memory: memory)
        let handle = try fileSystem.open(inode).get().handle
        XCTAssertEqual(try fileSystem.attributes(of: inode).get().size, UInt64(bytes.count))
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 100_000, count: 1000)?.get(),
                       Array(bytes[100_000..<101_000]))
        let probeBytes = UInt64(FileSystemSettings().openProbeBytes)
        XCTAssertEqual(memory.requests.filter { $0.url == base + "c.bin" }.map(\.range), [0..<probeBytes],
                       "one request: the probe's")
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 900_000, count: 100_000)?.get(),
                       Array(bytes[900_000..<1_000_000]))
        fileSystem.release(handle)
    }

    /// What the probe sink makes of an answer: the result, and the bytes it keeps (collected to the end).
    func probed(_ head: ResponseHead, body: [UInt8], limit: Int) -> (Result<FirstBytes, FetchError>?, [UInt8]) {
        let result = LockedBox<Result<FirstBytes, FetchError>?>(nil)
        let sink = FirstBytesSink(url: "http://origin/f", limit: limit) { got in result.withLock { $0 = got } }
        // As the fetcher does: a sink that refuses the head or a body chunk cuts the transfer.
        let whole = sink.receive(head: head) && body.withUnsafeBytes { sink.receive(body: $0) }
        sink.complete(error: whole ? nil : .cancelled)
        let kept = LockedBox<[UInt8]>([])
        switch result.withLock({ $0 }) {
        case .success(let first):
            switch first.body {
            case .bytes(let bytes): kept.withLock { $0 = bytes }
            case .streaming(let rest): rest.collect { bytes in kept.withLock { $0 = bytes } }
            }
        default: break
        }
        return (result.withLock { $0 }, kept.withLock { $0 })
    }

    /// A 200 with exactly the range asked for passes the checks of a 206's body (ResponseHead+Trust.swift), a 200
    /// with another Content-Range is a wrong Content-Range, and a 200 without one is still the whole file.
    func testTheProbesAnswerWith200IsJudgedByItsContentRange() throws {
        let file = Array(bytes.prefix(100))
        let range = ["content-range": "bytes 0-9/100", "content-length": "10", "etag": "\"e\""]
        let (right, rightBytes) = probed(ResponseHead(status: 200, headers: range), body: Array(file[..<10]), limit: 10)
        XCTAssertEqual(try right?.get().metadata.size, 100)
        XCTAssertEqual(rightBytes, Array(file[..<10]))

        var gzip = range
        gzip["content-encoding"] = "gzip"
        let (encoded, encodedBytes) = probed(ResponseHead(status: 200, headers: gzip), body: Array(file[..<10]), limit: 10)
        XCTAssertEqual(try encoded?.get().metadata.size, 100, "kept as a probe")
        XCTAssertEqual(encodedBytes, [], "none of an encoded body")
        var short = range
        short["content-length"] = "5"
        let (lying, lyingBytes) = probed(ResponseHead(status: 200, headers: short), body: Array(file[..<5]), limit: 10)
        XCTAssertEqual(try lying?.get().metadata.size, 100, "kept as a probe")
        XCTAssertEqual(lyingBytes, [], "none of a body shorter than its range")

        let shifted = ["content-range": "bytes 5-14/100", "content-length": "10"]
        let (wrong, wrongBytes) = probed(ResponseHead(status: 200, headers: shifted), body: Array(file[5..<15]), limit: 10)
        XCTAssertThrowsError(try wrong?.get()) { XCTAssertEqual($0 as? FetchError, .badContentRange("bytes 5-14/100")) }
        XCTAssertEqual(wrongBytes, [])

        let (whole, wholeBytes) = probed(ResponseHead(status: 200, headers: ["content-length": "100"]), body: file,
                                         limit: 10)
        XCTAssertEqual(try whole?.get().metadata.size, 100, "a 200 without Content-Range: the whole file")
        XCTAssertEqual(wholeBytes, Array(file[..<10]))
    }

    /// What a probe asks for: all of a file of unknown size or of at most the probe's size, only the first block of
    /// a larger one (so its connection is free again within a block's transfer), never more than the probe's size.
    func testAProbeAsksForASmallFileWholeAndForTheFirstBlockOfALargerOne() {
        let limit = 256 << 10, block = 64 << 10
        XCTAssertEqual(FirstBytes.probeLength(size: nil, limit: limit, block: block), limit)
        XCTAssertEqual(FirstBytes.probeLength(size: 1000, limit: limit, block: block), limit)
        XCTAssertEqual(FirstBytes.probeLength(size: UInt64(limit), limit: limit, block: block), limit)
        XCTAssertEqual(FirstBytes.probeLength(size: UInt64(limit) + 1, limit: limit, block: block), block)
        XCTAssertEqual(FirstBytes.probeLength(size: 1 << 30, limit: limit, block: block), block)
        XCTAssertEqual(FirstBytes.probeLength(size: 1 << 30, limit: limit, block: 1 << 20), limit,
                       "a block larger than the probe: the probe's size")
    }
}
