// An origin in memory for unit tests of the core, which is built to run without sockets (DESIGN.md §1). It
// follows HTTP's rules for Range and If-Range the way nginx does, answers on its own queue like the curl engine
// answers on its thread, and records every request so tests can count what was fetched.

import Dispatch
import Foundation
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSSystem

/// Serves byte arrays as if over HTTP, recording requests.
public final class MemoryOrigin: RangeFetching, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is guarded by `lock`.
    private let lock = NSLock()
    private var files: [String: (bytes: [UInt8], etag: String)] = [:]
    private var log: [RangeRequest] = []
    private let queue = DispatchQueue(label: "memory-origin", attributes: .concurrent)
    /// Delay before each response starts, to make requests overlap in time.
    public var latency: Double = 0
    /// Body bytes per write callback.
    public var chunkSize = 16 << 10
    /// Seconds to wait before each body write callback, for a slow link.
    public var chunkDelay: Double = 0
    /// Refuse every connection, like a stopped server.
    public var isDown = false
    /// How requests fail while `isDown`: refused, or `.timedOut` for a server that accepts but never answers.
    public var downError: FetchError = .connectionRefused
    /// Answer every request with the whole file as 200, like a server that does not do Range.
    public var ignoresRange = false
    /// Send no length and no ETag, and ignore Range, like a server that streams a generated body in chunks.
    public var sendsNoLength = false
    /// The Last-Modified of every file.
    public var lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
    /// Every answer carries another ETag (`"node-N"`), as nodes behind a load balancer that make their own do.
    public var rotatesETags = false
    private var answers = 0
    /// Fail every probe with a 503, like a server that answers transfers but not a new request for the file.
    public var probesFail = false
    private var probesAnswered = 0
    private var probed: [String] = []
    /// Hosts whose requests are held unanswered (`hang(host:)`), and the requests held, by host.
    private var hungHosts: Set<String> = []
    private var held: [String: [@Sendable () -> Void]] = [:]

    /// Holds every request (probe or transfer) for `host` unanswered from now on, like a server that accepts
    /// connections and never answers, until `release(host:)`.
    public func hang(host: String) {
        lock.lock()
        hungHosts.insert(host)
        lock.unlock()
    }

    /// Answers `host` again: the requests it held fail with `.timedOut`, as the low-speed timeout ends them, and
    /// new ones are answered as usual.
    public func release(host: String) {
        lock.lock()
        hungHosts.remove(host)
        let failures = held.removeValue(forKey: host) ?? []
        lock.unlock()
        for fail in failures { fail() }
    }

    /// Fails the oldest request held for `host` with `.timedOut`; the host goes on holding the others and new ones.
    public func releaseOldest(host: String) {
        lock.lock()
        let oldest = held[host]?.isEmpty == false ? held[host]!.removeFirst() : nil
        lock.unlock()
        oldest?()
    }

    /// How many requests for `host` are held unanswered now.
    public func heldRequests(host: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return held[host]?.count ?? 0
    }

    /// Holds `fail` instead of answering if the host of `url` hangs (the lock is held); true if it did.
    private func holdIfHung(_ url: String, _ fail: @escaping @Sendable () -> Void) -> Bool {
        let afterScheme = url.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first
        guard let host = afterScheme.map(String.init), hungHosts.contains(host) else { return false }
        held[host, default: []].append(fail)
        return true
    }

    /// The URL of every probe, in order.
    public var probedURLs: [String] {
        lock.lock()
        defer { lock.unlock() }
        return probed
    }

    /// How many probes were answered.
    public var probeCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return probesAnswered
    }
    /// Answer a Range request with 200 and only the range, with its Content-Range, and ignore If-Range, as
    /// `rclone serve s3` (1.75) does.
    public var answersRangesWith200 = false
    /// Answer a Range request with 206 and the range whatever its If-Range (or an object store's If-Match) says,
    /// as a gateway or CDN that drops the condition does.
    public var ignoresIfRange = false
    /// Headers added to every answer (after its own): a lie, or a server's own habit.
    public var extraHeaders: [String: String] = [:]
    /// Claim a Content-Range this many bytes later than the one asked for (and send those bytes).
    public var contentRangeShift: UInt64 = 0
    /// The next `dropsLeft` responses end with a transport error after this many body bytes.
    public var dropAfterBytes = 0
    public var dropsLeft = 0
    /// The server is down (`isDown`) from the moment it drops a response: nothing a retry asks reaches it.
    public var downAfterDrop = false
    private var delivered: UInt64 = 0
    private var bodiesHeld = false

    /// Holds every body after its head, from its next piece on, until `releaseBodies`: a server that has not
    /// produced the rest yet (a test's gate).
    public func holdBodies() {
        lock.lock()
        bodiesHeld = true
        lock.unlock()
    }

    public func releaseBodies() {
        lock.lock()
        bodiesHeld = false
        lock.unlock()
    }

    private var isHoldingBodies: Bool {
        lock.lock()
        defer { lock.unlock() }
        return bodiesHeld
    }
    private var backgroundPaused = false
    /// How often background transfers were paused.
    public private(set) var backgroundPauses = 0
    private var active = 0
    private var peakActive = 0

    /// The most transfers that were answering at the same time.
    public var peakConcurrency: Int {
        lock.lock()
        defer { lock.unlock() }
        return peakActive
    }

    /// Body bytes actually handed to sinks.
    public var bodyBytesDelivered: UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return delivered
    }

    public init() {}

    public func serve(_ url: String, bytes: [UInt8], etag: String = "\"v1\"") {
        lock.lock()
        files[url] = (bytes, etag)
        lock.unlock()
    }

    /// Stops serving `url`: it answers 404 from now on.
    public func remove(_ url: String) {
        lock.lock()
        files[url] = nil
        lock.unlock()
    }

    /// Every ranged request received, in order.
    public var requests: [RangeRequest] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    /// Body bytes sent for ranged requests.
    public var bytesSent: UInt64 { requests.reduce(0) { $0 + UInt64($1.range?.count ?? 0) } }

    public func start(_ request: RangeRequest, sink: RangeResponseSink) {
        lock.lock()
        log.append(request)
        var stored = files[request.url]
        answers += 1
        if rotatesETags { stored?.etag = "\"node-\(answers)\"" }
        let file = stored
        let (ignoresRange, shift, isDown, downError) = (self.ignoresRange || sendsNoLength, contentRangeShift, self.isDown,
                                                        self.downError)
        let (noLength, lastModified, partsWith200) = (sendsNoLength, self.lastModified, answersRangesWith200)
        let dropsCondition = ignoresIfRange
        let extraHeaders = self.extraHeaders
        let dropAfter: Int? = dropsLeft > 0 ? dropAfterBytes : nil
        if dropsLeft > 0 { dropsLeft -= 1 }
        lock.unlock()
        lock.lock()
        active += 1
        peakActive = max(peakActive, active)
        lock.unlock()
        let finish: @Sendable (FetchError?) -> Void = { error in
            self.lock.lock()
            self.active -= 1
            self.lock.unlock()
            sink.complete(error: error)
        }
        lock.lock()
        let hung = holdIfHung(request.url) { finish(.timedOut) }
        lock.unlock()
        if hung { return }
        queue.asyncAfter(deadline: .now() + latency) { [chunkSize, chunkDelay] in
            if isDown { return finish(downError) }
            guard let file else {
                _ = sink.receive(head: ResponseHead(status: 404, headers: [:]))
                return finish(nil)
            }
            var body = file.bytes[...]
            var headers = noLength ? ["last-modified": lastModified]
                : ["etag": file.etag, "content-length": String(file.bytes.count), "last-modified": lastModified]
            var status = 200
            if let asked = request.range, !ignoresRange, partsWith200 || dropsCondition || request.ifRange == nil
                || request.ifRange == file.etag || request.ifRange == lastModified {
                let range = (asked.lowerBound + shift)..<(asked.upperBound + shift)
                let upper = min(UInt64(file.bytes.count), range.upperBound)
                body = file.bytes[Int(range.lowerBound)..<Int(upper)]
                headers["content-range"] = "bytes \(range.lowerBound)-\(upper - 1)/\(file.bytes.count)"
                headers["content-length"] = String(body.count)
                status = partsWith200 ? 200 : 206
            }
            headers.merge(extraHeaders) { $1 }
            guard sink.receive(head: ResponseHead(status: status, headers: headers)) else {
                return finish(.cancelled)
            }
            var sent = 0
            while !body.isEmpty {
                while sink.isPaused || (sink.isBackground && self.isBackgroundPaused) || self.isHoldingBodies {
                    usleep(1000)
                }
                if let dropAfter, sent >= dropAfter {
                    self.lock.lock()
                    if self.downAfterDrop { self.isDown = true }
                    self.lock.unlock()
                    return finish(.transport("connection reset"))
                }
                if chunkDelay > 0 { usleep(useconds_t(chunkDelay * 1e6)) }
                let piece = Array(body.prefix(min(chunkSize, (dropAfter ?? Int.max) - sent)))
                body = body.dropFirst(piece.count)
                sent += piece.count
                self.lock.lock()
                self.delivered += UInt64(piece.count)
                self.lock.unlock()
                let accepted = piece.withUnsafeBytes { sink.receive(body: $0) }
                if !accepted { return finish(.cancelled) }
            }
            finish(nil)
        }
    }

    public func pauseBackground(_ paused: Bool) {
        lock.lock()
        if paused && !backgroundPaused { backgroundPauses += 1 }
        backgroundPaused = paused
        lock.unlock()
    }

    public func wake() {}

    private var isBackgroundPaused: Bool {
        lock.lock()
        defer { lock.unlock() }
        return backgroundPaused
    }

    public func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        lock.lock()
        var (file, isDown, probesFail) = (files[url], self.isDown, self.probesFail)
        answers += 1
        if rotatesETags { file?.etag = "\"node-\(answers)\"" }
        let (noLength, lastModified) = (sendsNoLength, self.lastModified)
        probesAnswered += 1
        probed.append(url)
        let hung = holdIfHung(url) { completion(.failure(.timedOut)) }
        lock.unlock()
        if hung { return }
        if isDown { return completion(.failure(.connectionRefused)) }
        if probesFail { return completion(.failure(.httpStatus(503))) }
        guard let file else { return completion(.failure(.httpStatus(404))) }
        if noLength { return completion(.success(.unsized(url: url, etag: "", lastModified: lastModified))) }
        var metadata = RemoteMetadata(url: url, size: UInt64(file.bytes.count), etag: file.etag,
                                      lastModified: lastModified)
        // A Date among the extra headers dates this answer too, as a probe's head would.
        metadata.answeredAt = extraHeaders["date"].flatMap(HTTPDate.parse)
        completion(.success(metadata))
    }
}

/// Deterministic pseudo-random bytes (SplitMix64), so unit tests need no files.
public func pseudoRandomBytes(count: Int, seed: UInt64 = 42) -> [UInt8] {
    var state = seed
    var bytes = [UInt8]()
    bytes.reserveCapacity(count + 8)
    while bytes.count < count {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        withUnsafeBytes(of: mixed) { bytes.append(contentsOf: $0) }
    }
    return Array(bytes.prefix(count))
}
