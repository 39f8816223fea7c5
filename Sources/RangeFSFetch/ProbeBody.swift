// The body of an open's probe, once its head named the bytes asked for (FirstBytes.swift). The open needs only
// the head (size and validators), so it is answered there; the body goes on streaming, and becomes the file's
// first blocks as it comes, like the body of any request of the entry.
//
// Why a hand-over to a BlockSink, and not a second kind of block transfer: the probe's request is already on the
// wire before anyone knows the file's size, block size or cache entry, so it cannot be started as a range fetch of
// the entry. But once its head is judged, what is left of it is exactly one: a 206 for `0..<n` of a known version
// (or a 200 that carries exactly those bytes, which the BlockSink takes as that 206, see ResponseHead+Range.swift).
// So its owner claims those blocks in the entry, makes the scheduler adopt the transfer (FetchScheduler.adopt), and
// hands this body to the BlockSink that returns. Everything a fetch of the entry does then holds for the probe's
// bytes without a second copy of it: a READ for them finds them in flight and waits for its own block, not for
// the whole probe, and sends no second request; a body in a foreign encoding, a body without a stated length
// (held back until it ends where its Content-Range said), or one that runs past its range keeps none of its bytes
// (BlockSink enforces issue 35's rules); a transfer cut midway goes on from its byte; a transfer nobody wants stops.
//
// The head is judged on the fetcher's thread, while the entry is opened on the directory service's queue; body
// bytes that arrive between the two are held here (at most the probe's size and one chunk), then replayed in
// order, so the sink sees one transfer: head, body..., end. Where the bytes cannot go to one BlockSink (some of
// those blocks are cached or in flight already, or the entry's blocks do not end where the probe does), they are
// collected and given whole when the body ends, as before: the open still answers at the head.

import RangeFSSystem

/// The rest of an open's probe after its head: held until its owner says where it goes, then passed on in order.
package final class ProbeBody: Sendable {
    /// The head, replayed to the sink the body is handed to.
    let head: ResponseHead
    /// The bytes of the file the head names, from byte 0.
    package let span: Range<UInt64>
    /// Whether a header fixes the body's length; a body without one is kept only if it ended exactly at its span.
    private let lengthStated: Bool

    private enum Destination {
        case undecided
        case sink(any RangeResponseSink)
        case collect(@Sendable ([UInt8]) -> Void)
    }

    private struct State {
        var destination = Destination.undecided
        /// The body received while undecided or collecting, in order.
        var bytes: [UInt8] = []
        /// How the transfer ended, once it did (`.some(nil)`: its whole body came).
        var ended: FetchError?? = nil
        /// The sink refused the head or a body chunk: the transfer is cut, and the sink hears only its end.
        var refused = false
        /// The body ran past its span (then it is cut, and none of it is collected).
        var tooLong = false
        /// Told when the transfer ended (`whenEnded`).
        var endObservers: [@Sendable () -> Void] = []
    }

    private let state = LockedBox(State())

    init(head: ResponseHead, span: Range<UInt64>, lengthStated: Bool) {
        self.head = head
        self.span = span
        self.lengthStated = lengthStated
    }

    // MARK: The fetcher's side (one thread, in order)

    /// A chunk of the body; false cuts the transfer.
    func receive(_ body: UnsafeRawBufferPointer) -> Bool {
        state.withLock { state in
            if case .sink(let sink) = state.destination {
                if state.refused { return false }
                if !sink.receive(body: body) { state.refused = true }
                return !state.refused
            }
            // Room for the span at the first chunk (the probe's asked length bounds it): grown by appends, a
            // small file's first bytes were copied again at each doubling (3.4% of a cold read of small files).
            if state.bytes.capacity == 0 { state.bytes.reserveCapacity(Int(span.count)) }
            state.bytes.append(contentsOf: body)
            // Held whole, overflow included, so that a sink it is handed to judges it as it would have live.
            if state.bytes.count > span.count { state.tooLong = true }
            return !state.tooLong
        }
    }

    /// The transfer ended (nil: its whole body came).
    func complete(error: FetchError?) {
        let (collected, observers) = state.withLock { state -> ((@Sendable ([UInt8]) -> Void, [UInt8])?, [@Sendable () -> Void]) in
            state.ended = .some(error)
            let observers = state.endObservers
            state.endObservers = []
            switch state.destination {
            case .undecided:
                return (nil, observers)
            case .sink(let sink):
                sink.complete(error: state.refused ? .cancelled : error)
                return (nil, observers)
            case .collect(let then):
                return ((then, kept(state)), observers)
            }
        }
        if let (then, bytes) = collected { then(bytes) }
        for observer in observers { observer() }
    }

    /// Calls `observer` once the transfer ended (at once if it has), after its bytes went where they go: for a
    /// fetch ahead, whose slot is taken until its probe's whole transfer is over (DirectoryPrefetch.swift).
    func whenEnded(_ observer: @escaping @Sendable () -> Void) {
        let ended = state.withLock { state -> Bool in
            if state.ended != nil { return true }
            state.endObservers.append(observer)
            return false
        }
        if ended { observer() }
    }

    // MARK: The owner's side (once)

    /// Passes the whole transfer on to `sink`: the head and what came so far at once, the rest as it comes.
    package func hand(to sink: any RangeResponseSink) {
        state.withLock { state in
            guard case .undecided = state.destination else { return }
            state.destination = .sink(sink)
            let held = state.bytes
            state.bytes = []
            if !sink.receive(head: head) {
                state.refused = true
            } else if !held.isEmpty {
                // SAFETY: the pointer is used only inside the closure, while `held` is alive.
                state.refused = !held.withUnsafeBytes { sink.receive(body: $0) }
            }
            if let ended = state.ended { sink.complete(error: state.refused ? .cancelled : ended) }
        }
    }

    /// Keeps the body, and gives it to `then` when it ended: the bytes from offset 0, as many as came, or none if
    /// it was no right answer after all (a body without a stated length that did not end at its span, or one that
    /// ran past it).
    package func collect(then: @escaping @Sendable ([UInt8]) -> Void) {
        let ready = state.withLock { state -> [UInt8]? in
            guard case .undecided = state.destination else { return nil }
            state.destination = .collect(then)
            return state.ended == nil ? nil : kept(state)
        }
        if let ready { then(ready) }
    }

    /// Lets the body run to its end (so that its connection is kept) and drops it.
    func discard() {
        collect { _ in }
    }

    /// The collected bytes that count, once the transfer ended.
    private func kept(_ state: State) -> [UInt8] {
        if state.tooLong { return [] }
        if !lengthStated {
            guard let ended = state.ended, ended == nil || ended == .cancelled, state.bytes.count == span.count
            else { return [] }
        }
        return state.bytes
    }
}
