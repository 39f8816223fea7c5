// The probe that is also the first data request (DESIGN.md §7). Opening a listed file needs its validators, and
// reading it needs its first bytes: one GET for `bytes=0-(n-1)` brings both. Its head is read as a probe's (size
// from Content-Range, ETag, Last-Modified, name); its body, up to `n` bytes, becomes the file's first blocks. So a
// file no larger than `n` costs one request in all, where a one-byte probe and a data request made two.

import Synchronization

/// What a probe with its first bytes brings.
struct FirstBytes: Sendable {
    var metadata: RemoteMetadata
    /// The file's bytes from offset 0, as many as came (fewer than asked for if the file is shorter, or if the
    /// transfer broke after its head: the probe itself still succeeded).
    var bytes: [UInt8]
}

/// Collects the head and the first `limit` body bytes of a `bytes=0-(limit-1)` request.
final class FirstBytesSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread, in order.
    private let url: String
    private let limit: Int
    private let completion: @Sendable (Result<FirstBytes, FetchError>) -> Void
    private var head: ResponseHead?
    private var bytes: [UInt8] = []

    init(url: String, limit: Int, completion: @escaping @Sendable (Result<FirstBytes, FetchError>) -> Void) {
        self.url = url
        self.limit = limit
        self.completion = completion
    }

    func receive(head: ResponseHead) -> Bool {
        self.head = head
        // A 206 carries the range; a 200 (a server that ignores Range) the whole file, read up to `limit`. Any other
        // answer is judged from its head alone, as a probe's.
        guard head.status == 206 || head.status == 200 else { return false }
        if head.status == 206, let range = head["content-range"].flatMap(ContentRange.init(parsing:))?.range,
           range.lowerBound != 0 {
            return false  // not the bytes asked for: kept as a probe only
        }
        bytes.reserveCapacity(min(limit, head["content-length"].flatMap(Int.init) ?? limit))
        return true
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        bytes += body.prefix(limit - bytes.count)
        return bytes.count < limit  // stops a 200's whole-file body once enough has come
    }

    func complete(error: FetchError?) {
        guard let head else { return completion(.failure(error ?? .shortBody)) }
        do throws(FetchError) {
            let metadata = try RemoteMetadata(url: url, probeResponse: head)
            // Bytes from a response whose range was not 0.. were dropped in `receive(head:)`.
            let body = head.status == 206 || head.status == 200 ? bytes : []
            completion(.success(FirstBytes(metadata: metadata, bytes: metadata.sizeKnown ? body : [])))
        } catch {
            completion(.failure(error))
        }
    }
}

extension RangeFetching {
    /// Probes `url` with a request for its first `count` bytes, and reports what a probe learns with those bytes.
    func probe(url: String, firstBytes count: Int,
                      completion: @escaping @Sendable (Result<FirstBytes, FetchError>) -> Void) {
        start(RangeRequest(url: url, range: 0..<UInt64(max(1, count)), ifRange: nil),
              sink: FirstBytesSink(url: url, limit: max(1, count), completion: completion))
    }
}
