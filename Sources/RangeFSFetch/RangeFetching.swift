import Dispatch
import RangeFSCache
import RangeFSCatalog
import RangeFSSystem

// The seam between the cache and the network. RangeFSHTTP implements `RangeFetching` with libcurl; the core only
// sees requests, response heads, body bytes and errors, so it is tested without sockets.

/// One ranged GET.
public struct RangeRequest: Sendable, Equatable {
    public var url: String
    /// The bytes wanted, `lowerBound..<upperBound`; sent as `Range: bytes=lower-(upper-1)`. Nil asks for the
    /// whole file without a Range header, for servers that ignore Range.
    public var range: Range<UInt64>?
    /// Sent as `If-Range`: the stored ETag, else the stored Last-Modified, so a changed file answers 200.
    public var ifRange: String?
    /// Receive-rate cap for this transfer, for background fill under a bandwidth limit.
    public var maxBytesPerSecond: Int?
    /// Sent as `Accept` (a directory listing asks for JSON first).
    public var accept: String?
    /// Seconds without progress after which the fetcher gives the transfer up and fails it with `.stalled`: no
    /// byte since its request went out, leaving out the time it was paused. Nil leaves only the connection's
    /// low-speed timeout. Set for a request on one of several mirrors, where another can take over at once.
    public var stallTimeout: Double?

    init(url: String, range: Range<UInt64>?, ifRange: String?) {
        self.url = url
        self.range = range
        self.ifRange = ifRange
    }
}

/// The status and headers of a response, header names lowercased. For redirects, only the final response.
public struct ResponseHead: Sendable, Equatable {
    public var status: Int
    var headers: [String: String]
    /// The URL that answered, after redirects; nil if the fetcher does not say.
    var effectiveURL: String?
    /// The proxy the response came through (without credentials), if any: a 5xx names it, and its bytes are
    /// counted for it.
    var proxy: String?
    /// Set on an answer that says "not now" (503, 429) which the fetcher asked again for this many seconds before
    /// giving up (ThrottleRetry.swift): it fails with `.serverBusy`, which is not retried again.
    public var retriedFor: Double?

    public init(status: Int, headers: [String: String], effectiveURL: String? = nil, proxy: String? = nil,
                retriedFor: Double? = nil) {
        self.status = status
        self.headers = headers
        self.effectiveURL = effectiveURL
        self.proxy = proxy
        self.retriedFor = retriedFor
    }

    subscript(name: String) -> String? { headers[name.lowercased()] }

    /// The error for a status that is not the answer wanted. A server error through a proxy names the proxy: it
    /// may be the proxy's own answer (tinyproxy says 500 "Unable to connect", squid 503, others 502 or 504).
    var statusError: FetchError {
        if let retriedFor { return .serverBusy(status: status, seconds: Int(retriedFor.rounded())) }
        if let proxy, status >= 500 { return .proxyStatus(status, proxy) }
        return .httpStatus(status)
    }
}

/// Receives one transfer's response. Calls come from the fetcher's thread, in order: `receive(head:)` once,
/// `receive(body:)` any number of times, then `complete(error:)` exactly once (also after a cancel).
public protocol RangeResponseSink: AnyObject, Sendable {
    /// Returns false to cancel the transfer (the head was not acceptable).
    func receive(head: ResponseHead) -> Bool
    /// Returns false to cancel the transfer.
    func receive(body: UnsafeRawBufferPointer) -> Bool
    /// `nil` when the whole body arrived.
    func complete(error: FetchError?)
    /// Whether this is background work, to be paused while readers wait; may change during the transfer.
    var isBackground: Bool { get }
    /// Whether receiving should stop for now whatever else happens (the user paused the file); may change.
    var isPaused: Bool { get }
}

extension RangeResponseSink {
    public var isBackground: Bool { false }
    public var isPaused: Bool { false }
}

/// Something that performs ranged GETs and probes; libcurl in production.
public protocol RangeFetching: Sendable {
    /// Starts a transfer. The sink's calls arrive later, on another thread.
    func start(_ request: RangeRequest, sink: RangeResponseSink)
    /// Pauses (or resumes) receiving on every transfer whose sink is background work, so readers get the link and
    /// the CPU. Called again with the same value after a sink stopped being background work, to resume it.
    func pauseBackground(_ paused: Bool)
    /// Re-checks at once which paused transfers may continue.
    func wake()
    /// Asks for the first byte of `url` and reports its size, validators and name.
    func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void)
}

extension RangeFetching {
    /// Probes several URLs, up to `window` at a time, and returns the results in the same order. The window keeps
    /// a list of 10,000 URLs from making 10,000 transfers (and their buffers) at once: the connection cap would
    /// run them a few at a time anyway.
    public func probeAll(_ urls: [String], window: Int = 64) -> [Result<RemoteMetadata, FetchError>] {
        let results = LockedBox([Result<RemoteMetadata, FetchError>?](repeating: nil, count: urls.count))
        let group = DispatchGroup()
        let slots = DispatchSemaphore(value: max(1, window))
        for (index, url) in urls.enumerated() {
            slots.wait()
            group.enter()
            probe(url: url) { result in
                results.withLock { $0[index] = result }
                slots.signal()
                group.leave()
            }
        }
        group.wait()
        return results.withLock { $0.map { $0! } }
    }
}

extension RangeFetching {
    /// GETs the whole of `url` (a directory listing), asking for JSON first, and hands its body to `completion`
    /// (on the fetcher's thread: hand heavy work on); fails with `.listingTooLarge` beyond `limit` bytes, with
    /// `.listingTimedOut` when it has not arrived `timeout` seconds from now (ListingDeadline.swift), or with the
    /// status of a response other than 200. `firstPage` is called (once, on the fetcher's thread) when a long
    /// answer's first `ListingSink.firstPageBytes` read as the start of a listing, before the rest arrives.
    package func fetchListing(_ url: String, limit: Int, timeout: Double, firstPage: (@Sendable () -> Void)? = nil,
                      completion: @escaping @Sendable (Result<[UInt8], FetchError>) -> Void) {
        var request = RangeRequest(url: url, range: nil, ifRange: nil)
        request.accept = "application/json, text/html;q=0.9, */*;q=0.1"
        let sink = ListingSink(limit: limit, deadline: ListingDeadline(seconds: timeout), firstPage: firstPage) {
            completion($0.map(\.body))
        }
        start(request, sink: sink)
    }
}

/// Collects a listing's body, up to a limit and a deadline. A web listing's answer other than 200 fails at its
/// head; an object store's error answer is kept (`keepingErrorBodies`), since its body names the reason
/// (ObjectListing.swift).
final class ListingSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls in order from one thread, and `completion` runs once, last.
    private let limit: Int
    private let deadline: ListingDeadline
    private let keepingErrorBodies: Bool
    /// Whether the answer is an error whose body is read only to `BlockSink.errorBodyLimit`, and whether it was cut
    /// there (issue 45, case 11: a 100 MB error body was read whole, four times).
    private var isError = false
    private var errorBodyCut = false
    private let completion: @Sendable (Result<(status: Int, body: [UInt8], cut: Bool), FetchError>) -> Void
    private var status = 0
    private var body: [UInt8] = []
    private var failure: FetchError?
    /// Called once a long answer's first bytes read as a listing's start; nil once called.
    private var firstPage: (@Sendable () -> Void)?
    /// Called with an object store page's NextContinuationToken as soon as its bytes hold it, before the rest of
    /// the page has come (ObjectListing.swift asks the next page then); nil once called or given up.
    private var ahead: (@Sendable (String) -> Void)?
    private var continuationScan = ContinuationScan()

    /// How much of a web listing must have come before it counts as known to be one (`firstPage`): some hundreds
    /// of entries. A shorter listing is read whole about as soon, and is then judged whole (a mount that cannot
    /// list its directory says so at once).
    static let firstPageBytes = 64 << 10

    init(limit: Int, deadline: ListingDeadline, keepingErrorBodies: Bool = false,
         firstPage: (@Sendable () -> Void)? = nil, ahead: (@Sendable (String) -> Void)? = nil,
         completion: @escaping @Sendable (Result<(status: Int, body: [UInt8], cut: Bool), FetchError>) -> Void) {
        self.limit = limit
        self.deadline = deadline
        self.keepingErrorBodies = keepingErrorBodies
        self.firstPage = firstPage
        self.ahead = ahead
        self.completion = completion
    }

    func receive(head: ResponseHead) -> Bool {
        // A server that took the whole time to answer at all (its redirects, a slow head).
        if deadline.isPast {
            failure = deadline.error
            return false
        }
        status = head.status
        // An object store's "not now" the fetcher already asked again for: its body would only say SlowDown.
        guard head.status == 200 || keepingErrorBodies && head.retriedFor == nil else {
            failure = head.statusError
            return false
        }
        isError = head.status != 200
        // A compressed listing would be read as garbage, an empty folder: say why instead.
        if let refusal = head.untrustedBody(expectedLength: nil) {
            failure = refusal
            return false
        }
        return true
    }

    func receive(body bytes: UnsafeRawBufferPointer) -> Bool {
        // Checked as bytes come: a trickle fast enough for the low-speed floor still calls here, and a silent
        // server is ended by that floor.
        if deadline.isPast {
            failure = deadline.error
            return false
        }
        if isError, body.count + bytes.count > BlockSink.errorBodyLimit {
            body.append(contentsOf: bytes.prefix(BlockSink.errorBodyLimit - body.count))
            errorBodyCut = true
            return false
        }
        guard body.count + bytes.count <= limit else {
            failure = .listingTooLarge(limit)
            return false
        }
        body.append(contentsOf: bytes)
        if let firstPage, !isError, body.count >= Self.firstPageBytes {
            self.firstPage = nil
            if DirectoryListing.startsLikeListing(body) { firstPage() }
        }
        if let ahead, !isError {
            let token = continuationScan.token(in: body)
            if continuationScan.isDone { self.ahead = nil }
            if let token { ahead(token) }
        }
        return true
    }

    func complete(error: FetchError?) {
        // An error body cut where enough of it came: the transfer was cancelled here, not by the network.
        if failure == nil, let error, !errorBodyCut { failure = error }
        completion(failure.map { .failure($0) } ?? .success((status, body, errorBodyCut)))
        body = []
    }
}
