// The probe that is also the first data request (DESIGN.md §7). Opening a listed file needs its validators, and
// reading it needs its first bytes: one GET for `bytes=0-(n-1)` brings both. Its head is read as a probe's (size
// from Content-Range, ETag, Last-Modified, name); its body, up to `n` bytes, becomes the file's first blocks. So a
// file no larger than `n` costs one request in all, where a one-byte probe and a data request made two.
//
// The probe is reported as soon as it can be. A 206 for the bytes asked for, of a known size, is reported at its
// head, with its body still streaming (ProbeBody.swift): the open answers there, not when the `n` bytes have come
// (at 4 MiB/s, 256 KiB are 62 ms more on every first open). A 200 that carries exactly those bytes (rclone serve
// s3, see ResponseHead+Range.swift) is that 206. Any other answer is reported when it ends.
//
// A complete answer is never cut: a libcurl transfer whose write callback refuses bytes is aborted and its
// connection closed, so the next request to the same server pays a new handshake. A 206 ends by itself; a 200
// (a server that ignores Range) is cut once `n` bytes came only if more would follow.

import RangeFSCache
import Synchronization

/// What a probe with its first bytes brings.
package struct FirstBytes: Sendable {
    package var metadata: RemoteMetadata
    package var body: Body

    /// How many bytes the probe of a file asks for, with `limit` the mount's probe size and `block` its block size:
    /// `limit` for a file of unknown `size` or of at most `limit` bytes (all of it in one request), only the first
    /// block of a larger one. The probe's connection is busy until its body ended, and a reader that reads a byte
    /// and goes (`file`, `head -c 1`, `ls` with icons, a prober) opens the next file at once: behind a 256 KiB
    /// probe at 4 MiB/s that open found the connection busy and paid a new one (2.4 round trips, against 1.4
    /// when the first probe brought a block). A reader that goes on gets the rest from readahead, which asks for
    /// it after its second read anyway.
    package static func probeLength(size: UInt64?, limit: Int, block: Int) -> Int {
        guard let size, size > UInt64(limit) else { return limit }
        return max(1, min(limit, block))
    }

    /// The probe's bytes from offset 0.
    package enum Body: Sendable {
        /// As many as came (fewer than asked for if the file is shorter, or if the transfer broke after its head:
        /// the probe itself still succeeded).
        case bytes([UInt8])
        /// Still streaming: its owner says where they go.
        case streaming(ProbeBody)

        /// Lets bytes still streaming run to their end, and drops them.
        package func discard() {
            if case .streaming(let rest) = self { rest.discard() }
        }

        /// Calls `observer` once the probe's transfer ended: at once for bytes that all came.
        package func whenEnded(_ observer: @escaping @Sendable () -> Void) {
            guard case .streaming(let rest) = self else { return observer() }
            rest.whenEnded(observer)
        }
    }
}

/// Collects the head and the first `limit` body bytes of a `bytes=0-(limit-1)` request.
final class FirstBytesSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread, in order.
    private let url: String
    private let limit: Int
    private let completion: @Sendable (Result<FirstBytes, FetchError>) -> Void
    private var head: ResponseHead?
    private var bytes: [UInt8] = []
    /// How many body bytes the head says come (the range's span, or the file's size for a whole-file 200); the
    /// bytes are kept only if a body without a stated length ends exactly there (see ResponseHead+Trust.swift).
    private var expected: Int?
    private var lengthStated = false
    /// Body bytes received in all, and whether a 206's body ran past its range (then none of it is kept).
    private var received = 0
    private var tooLong = false
    /// A 200's stated Content-Length: the whole file's, which ends the body.
    private var wholeLength: Int?
    /// The body after a head reported at once (a part with the bytes asked for): it gets the rest of the transfer.
    private var rest: ProbeBody?
    /// Whether the answer is a part of the file (a 206, or a 200 with exactly the range asked for), not the whole.
    private var isPart = false
    /// The bytes asked for: the first `limit`.
    private var asked: Range<UInt64> { 0..<UInt64(limit) }

    init(url: String, limit: Int, completion: @escaping @Sendable (Result<FirstBytes, FetchError>) -> Void) {
        self.url = url
        self.limit = limit
        self.completion = completion
    }

    func receive(head: ResponseHead) -> Bool {
        self.head = head
        // A part (a 206, or a 200 with exactly the range asked for) carries the range; a 200 without a Content-Range
        // (a server that ignores Range) the whole file, read up to `limit`. Any other answer is judged from its head
        // alone, as a probe's.
        switch head.carriedBytes(asked: asked) {
        case .part(let contentRange):
            guard contentRange.fits(asked), let range = contentRange.range
            else { return false }  // not the bytes asked for: kept as a probe only
            expected = range.count
            isPart = true
        case .wholeFile:
            if let size = head["content-length"].flatMap({ Int($0.trimmingWhitespace()) }) { expected = min(limit, size) }
        case .wrongRange, .otherStatus:
            return false
        }
        // An answer whose body is not the bytes it names is kept as a probe only: none of its bytes are kept.
        guard head.untrustedBody(expectedLength: isPart ? expected.map(UInt64.init) : nil) == nil
        else { return false }
        lengthStated = head.statesItsLength
        if isPart, let expected, expected > 0,
           // A head that is no probe's answer (an unreadable date, say) is reported at the end, with its error.
           let metadata = try? ProbedMetadata.read(url: url, probeResponse: head, asked: asked), metadata.sizeKnown {
            let body = ProbeBody(head: head, span: 0..<UInt64(expected), lengthStated: lengthStated)
            rest = body
            completion(.success(FirstBytes(metadata: metadata, body: .streaming(body))))
            return true
        }
        if !isPart, lengthStated {
            wholeLength = head["content-length"].flatMap { Int($0.trimmingWhitespace()) }
        }
        bytes.reserveCapacity(expected ?? limit)
        return true
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        if let rest { return rest.receive(body) }
        received += body.count
        bytes += body.prefix(limit - bytes.count)
        if isPart {
            // The range asked for is the limit: a right answer ends by itself and keeps its connection; one that
            // runs past its range is cut, and kept as a probe only.
            if let expected, received > expected {
                tooLong = true
                return false
            }
            return true
        }
        // A 200's whole-file body is stopped once enough has come, unless it ends there anyway (a file of exactly
        // `limit` bytes): that one ends by itself and keeps its connection.
        return bytes.count < limit || wholeLength.map { received >= $0 } ?? false
    }

    func complete(error: FetchError?) {
        if let rest { return rest.complete(error: error) }
        guard let head else { return completion(.failure(error ?? .shortBody)) }
        do throws(FetchError) {
            let metadata = try ProbedMetadata.read(url: url, probeResponse: head, asked: asked)
            // Bytes of an answer that was neither the range asked for nor the whole file were refused at its head.
            var body = bytes
            // A body that no header gives a length to counts only if it ended where its head said it would.
            if tooLong || !lengthStated && (error != nil && error != .cancelled || expected.map { body.count != $0 } ?? true) {
                body = []
            }
            completion(.success(FirstBytes(metadata: metadata, body: .bytes(metadata.sizeKnown ? body : []))))
        } catch {
            completion(.failure(error))
        }
    }
}

extension RangeFetching {
    /// Probes `url` with a request for its first `count` bytes, and reports what a probe learns with those bytes:
    /// at the head of a 206 that brings them (its body still streaming), else when the answer ended. With
    /// `expecting`, an object store's listed ETag, the request carries it (as `If-Match`, Credentials.swift): an
    /// object replaced since its listing answers 412, never another version's bytes.
    package func probe(url: String, firstBytes count: Int, expecting etag: String? = nil,
                      completion: @escaping @Sendable (Result<FirstBytes, FetchError>) -> Void) {
        start(RangeRequest(url: url, range: 0..<UInt64(max(1, count)), ifRange: etag),
              sink: FirstBytesSink(url: url, limit: max(1, count), completion: completion))
    }
}
