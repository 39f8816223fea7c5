// The link to each origin, measured (issue 36): its round-trip time and what one connection carries, from the
// transfers the mount makes anyway. Whatever fetches ahead (the next files of a directory today, readahead later)
// sizes its depth from these: enough bytes in flight to cover bandwidth × round trip, so a 150 ms link is filled
// without tuning and a loopback origin is not flooded.
//
// A `MeasuredFetcher` wraps the fetcher and times every transfer: the round trip is the time from the request's
// start to its head (a new connection's handshake and the server's think time included, as a reader pays them),
// smoothed as TCP smooths its RTT (1/8 of each new sample); a connection's throughput is the body's bytes over the
// time from head to end, taken from bodies of at least `minimumThroughputSample` bytes (a smaller one ends
// before its rate shows).

import Dispatch
import RangeFSCache
import RangeFSSystem

/// Round-trip time and per-connection throughput per origin (`scheme://host:port`), learned from transfers.
package final class LinkEstimate: Sendable {
    /// What is known of one origin.
    struct Link: Sendable, Equatable {
        /// Smoothed seconds from a request's start to its response's head.
        var roundTrip: Double?
        /// Smoothed bytes per second one connection carries.
        var throughput: Double?
        /// Transfers measured.
        var samples = 0
    }

    /// Bodies smaller than this say nothing of a connection's rate.
    static let minimumThroughputSample = 16 << 10
    /// How much of each new sample a smoothed value takes (TCP's SRTT gain).
    static let gain = 0.125

    private let links = LockedBox<[String: Link]>([:])

    package init() {}

    /// What is known of the origin of `url`.
    func link(for url: String) -> Link {
        links.withLock { $0[Self.origin(of: url)] ?? Link() }
    }

    /// Records one transfer of `url`: `headAfter` seconds from its start to its head (nil: it got none), then
    /// `bodyBytes` in `bodySeconds`.
    func record(url: String, headAfter: Double?, bodyBytes: Int, bodySeconds: Double) {
        let origin = Self.origin(of: url)
        links.withLock { links in
            var link = links[origin] ?? Link()
            if let headAfter, headAfter >= 0 {
                link.roundTrip = link.roundTrip.map { $0 + Self.gain * (headAfter - $0) } ?? headAfter
            }
            if bodyBytes >= Self.minimumThroughputSample, bodySeconds > 0 {
                let rate = Double(bodyBytes) / bodySeconds
                link.throughput = link.throughput.map { $0 + Self.gain * (rate - $0) } ?? rate
            }
            link.samples += 1
            links[origin] = link
        }
    }

    /// How many files of about `typicalBytes` each to have in flight to the origin of `url` so that the link
    /// stays busy over `connections` connections: one per connection, plus their bandwidth × round trip in
    /// files, within `bounds`. Until a connection's throughput is known (small files never show it), one per
    /// connection.
    func depth(for url: String, typicalBytes: Int, connections: Int, bounds: ClosedRange<Int>) -> Int {
        depth(forOrigin: Self.origin(of: url), typicalBytes: typicalBytes, connections: connections, bounds: bounds)
    }

    /// `depth(for:...)` for a URL whose `origin(of:)` is `origin`: a directory's stream of opens keeps its origin,
    /// instead of finding it again in a URL on every open (issue 46).
    package func depth(forOrigin origin: String, typicalBytes: Int, connections: Int, bounds: ClosedRange<Int>) -> Int {
        let link = links.withLock { $0[origin] ?? Link() }
        var files = Double(max(1, connections))
        if let roundTrip = link.roundTrip, let throughput = link.throughput, typicalBytes > 0 {
            // Each connection carries a file per round trip plus its transfer: to keep the link busy, the
            // bytes in flight must cover what the connections carry in one round trip.
            files += (throughput * Double(max(1, connections)) * roundTrip / Double(typicalBytes)).rounded(.up)
        }
        return min(bounds.upperBound, max(bounds.lowerBound, Int(min(files, Double(Int32.max)))))
    }

    /// `scheme://host:port` of `url` (its userinfo left out), the key of its link.
    /// Read as bytes: it is asked on every open of a directory read in order and every transfer, and by
    /// characters it was 3% of the daemon's time re-reading a cached tree.
    package static func origin(of url: String) -> String {
        let bytes = url.utf8
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        var index = bytes.startIndex
        var schemeEnd: String.Index?
        while schemeEnd == nil, index != bytes.endIndex {
            if bytes[index] == colon {
                let next = bytes.index(after: index)
                if next != bytes.endIndex, bytes[next] == slash {
                    let after = bytes.index(after: next)
                    if after != bytes.endIndex, bytes[after] == slash { schemeEnd = bytes.index(after: after) }
                }
            }
            index = bytes.index(after: index)
        }
        guard let schemeEnd else { return url }
        var hostStart = schemeEnd, hostEnd = schemeEnd
        var ascii = true
        while hostEnd != bytes.endIndex {
            let byte = bytes[hostEnd]
            if byte == slash || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "@") { hostStart = bytes.index(after: hostEnd) }
            if byte >= 0x80 { ascii = false }
            hostEnd = bytes.index(after: hostEnd)
        }
        let host = url[hostStart..<hostEnd]
        let lowered = ascii ? String(decoding: host.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                            : host.lowercased()
        return String(url[..<schemeEnd]) + lowered
    }
}

/// A fetcher that times each transfer of the one it wraps into a `LinkEstimate`; everything else passes through.
package final class MeasuredFetcher: RangeFetching {
    let fetcher: RangeFetching
    let estimate: LinkEstimate

    package init(_ fetcher: RangeFetching, estimate: LinkEstimate) {
        self.fetcher = fetcher
        self.estimate = estimate
    }

    package func start(_ request: RangeRequest, sink: RangeResponseSink) {
        fetcher.start(request, sink: TimingSink(sink, url: request.url, estimate: estimate))
    }

    package func pauseBackground(_ paused: Bool) { fetcher.pauseBackground(paused) }

    package func wake() { fetcher.wake() }

    package func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        let started = MonotonicClock.seconds()
        fetcher.probe(url: url) { [estimate] result in
            // A probe's answer is a head and at most a byte: the whole of it is the round trip.
            if case .success = result {
                estimate.record(url: url, headAfter: MonotonicClock.seconds() - started, bodyBytes: 0, bodySeconds: 0)
            }
            completion(result)
        }
    }
}

/// Passes a transfer's calls to its sink, noting when its head came and how many body bytes followed.
private final class TimingSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread, in order (RangeResponseSink).
    private let sink: RangeResponseSink
    private let url: String
    private let estimate: LinkEstimate
    private let started = MonotonicClock.seconds()
    private var headAt: Double?
    private var bodyBytes = 0

    init(_ sink: RangeResponseSink, url: String, estimate: LinkEstimate) {
        self.sink = sink
        self.url = url
        self.estimate = estimate
    }

    func receive(head: ResponseHead) -> Bool {
        headAt = MonotonicClock.seconds()
        return sink.receive(head: head)
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        bodyBytes += body.count
        return sink.receive(body: body)
    }

    func complete(error: FetchError?) {
        if let headAt {
            // A transfer paused for readers measures the pause, not the link: only its round trip counts.
            let bodySeconds = error == nil && !sink.isBackground ? MonotonicClock.seconds() - headAt : 0
            estimate.record(url: url, headAfter: headAt - started, bodyBytes: bodyBytes, bodySeconds: bodySeconds)
        }
        sink.complete(error: error)
    }

    var isBackground: Bool { sink.isBackground }
    var isPaused: Bool { sink.isPaused }
}
