import Dispatch
@testable import RangeFSFetch
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 36: the body of an open's probe after its head (ProbeBody.swift). It goes to a sink as one transfer,
/// whenever the sink comes, and collected, it keeps issue 35's rules.
final class ProbeBodyTests: XCTestCase {
    /// Records what a transfer's sink hears, in order; refuses body bytes once `refuseAfter` came.
    final class RecordingSink: RangeResponseSink, @unchecked Sendable {
        // @unchecked Sendable: one thread calls it at a time (the body's lock), and tests read it after.
        var events: [String] = []
        var bytes: [UInt8] = []
        var refuseAfter = Int.max

        func receive(head: ResponseHead) -> Bool {
            events.append("head \(head.status)")
            return true
        }

        func receive(body: UnsafeRawBufferPointer) -> Bool {
            bytes += body
            events.append("body \(body.count)")
            return bytes.count <= refuseAfter
        }

        func complete(error: FetchError?) {
            events.append("end \(error.map { "\($0)" } ?? "ok")")
        }
    }

    let file = pseudoRandomBytes(count: 1000, seed: 5)

    func makeBody(lengthStated: Bool = true) -> ProbeBody {
        var headers = ["content-range": "bytes 0-999/5000", "etag": "\"e\""]
        if lengthStated { headers["content-length"] = "1000" }
        return ProbeBody(head: ResponseHead(status: 206, headers: headers), span: 0..<1000, lengthStated: lengthStated)
    }

    @discardableResult
    func send(_ bytes: ArraySlice<UInt8>, to body: ProbeBody) -> Bool {
        Array(bytes).withUnsafeBytes { body.receive($0) }
    }

    func testWhatCameBeforeTheHandOverReachesTheSinkFirstAndTheRestAsItComes() {
        let body = makeBody()
        XCTAssertTrue(send(file[0..<300], to: body))
        XCTAssertTrue(send(file[300..<600], to: body))
        let sink = RecordingSink()
        body.hand(to: sink)
        XCTAssertEqual(sink.events, ["head 206", "body 600"])
        XCTAssertTrue(send(file[600...], to: body))
        body.complete(error: nil)
        XCTAssertEqual(sink.events, ["head 206", "body 600", "body 400", "end ok"])
        XCTAssertEqual(sink.bytes, file)
    }

    func testATransferThatEndedBeforeTheHandOverIsReplayedWhole() {
        let body = makeBody()
        send(file[...], to: body)
        body.complete(error: nil)
        let sink = RecordingSink()
        body.hand(to: sink)
        XCTAssertEqual(sink.events, ["head 206", "body 1000", "end ok"])
        XCTAssertEqual(sink.bytes, file)
    }

    func testASinkThatRefusesCutsTheTransferAndHearsOnlyItsEnd() {
        let body = makeBody()
        let sink = RecordingSink()
        sink.refuseAfter = 100
        body.hand(to: sink)
        XCTAssertFalse(send(file[0..<200], to: body), "the sink refused: the transfer is cut")
        XCTAssertFalse(send(file[200..<300], to: body))
        body.complete(error: .cancelled)
        XCTAssertEqual(sink.events, ["head 206", "body 200", "end cancelled"])
    }

    /// Issue 35's rules for bytes collected rather than streamed: a body without a stated length counts only if it
    /// ended exactly at its span; one that runs past it is cut and drops everything; one with a stated length keeps
    /// what came before a cut.
    func testACollectedBodyKeepsOnlyBytesItsHeadVouchesFor() {
        func collected(_ body: ProbeBody) -> [UInt8]? {
            let box = LockedBox<[UInt8]?>(nil)
            body.collect { bytes in box.withLock { $0 = bytes } }
            return box.withLock { $0 }
        }
        let exact = makeBody(lengthStated: false)
        send(file[...], to: exact)
        exact.complete(error: nil)
        XCTAssertEqual(collected(exact), file, "ended where its Content-Range said")

        let short = makeBody(lengthStated: false)
        send(file[0..<900], to: short)
        short.complete(error: nil)
        XCTAssertEqual(collected(short), [], "ended early, with no length to vouch for it")

        let long = makeBody(lengthStated: false)
        XCTAssertTrue(send(file[0..<900], to: long))
        XCTAssertFalse(send(file[0..<200], to: long), "past its range: cut")
        long.complete(error: .cancelled)
        XCTAssertEqual(collected(long), [])

        let cut = makeBody(lengthStated: true)
        let waiting = LockedBox<[UInt8]?>(nil)
        cut.collect { bytes in waiting.withLock { $0 = bytes } }
        send(file[0..<700], to: cut)
        XCTAssertNil(waiting.withLock { $0 }, "given when it ended, not before")
        cut.complete(error: .transport("reset"))
        XCTAssertEqual(waiting.withLock { $0 }, Array(file[0..<700]), "a stated length vouches for what came")
    }
}
