// A transfer's two halves of state: what its hop asks (fixed when it is made) and what its response said so far
// (changed only by libcurl's callbacks and `finish`, on the engine's thread).

import RangeFSFetch

extension Transfer {
    /// What one hop asks, and how it came to be asked: a redirect followed, a remembered target, a proxy of the
    /// chain tried after others failed, a "not now" answered before. The next hop is a copy with one change.
    struct Hop {
        /// Nil for a probe (one byte, for the file's size and validators).
        let request: RangeRequest?
        /// The URL this hop asks.
        let url: String
        /// What this hop sends: `url` with the real query put back when the credentials keep one for it.
        let wireURL: String
        /// The URL the mount asked for; `url` differs after a redirect, or when a remembered target is used.
        let originalURL: String
        /// Redirects followed before this hop.
        let hops: Int
        /// Whether `url` is a target remembered from an earlier request of `originalURL`.
        let remembered: Bool
        /// The proxy of the chain this hop goes through (`--proxy` groups); nil when the chain is not used.
        let chainProxy: ProxyChain.Proxy?
        /// Proxies of the chain this request tried before this hop, each having failed.
        let proxyTries: Int
        /// The "not now" answers (503, 429) this request got before this hop, and when the first came.
        let throttled: Throttled?
        /// Seconds the engine waits before it starts this hop: the pause after a "not now" (ThrottleRetry.swift).
        let startDelay: Double

        /// The request as the `-v` line shows it: method and range.
        var requestLine: String {
            guard let request else { return "GET bytes=0-0" }
            return request.range.map { "GET bytes=\($0.lowerBound)-\($0.upperBound - 1)" } ?? "GET"
        }
    }

    /// What this hop's response said so far, and what was done with it.
    struct Reception {
        /// Its headers by lowercased name (a repeated list header joined).
        var headers: [String: String] = [:]
        var headDelivered = false
        var cancelledBySink = false
        /// Whether the sink refused the response's head (a wrong answer), as opposed to leaving its body midway
        /// (nobody wants the rest): only the first says anything about the server.
        var refusedHead = false
        /// Whether the sink heard anything (a head) from this hop: until then, a proxy failure is retried here.
        var sinkHeard = false
        /// What the engine does after this hop, instead of reporting it to the sink (set from the response head).
        var followUp: FollowUp?
        /// Body bytes of a response that is followed up (a redirect's, a "not now"'s) read and dropped: past
        /// `droppedBodyLimit` the connection is closed instead (a 100 MB error body is not read, issue 45 case 11).
        var droppedBytes = 0
        var droppedBodyCut = false
        /// The header bytes so far, the last header's name, why the headers were refused (Transfer+HeaderLimits.swift).
        var headerBytes = 0
        var lastHeaderName: String?
        var headerRefusal: String?
    }

    /// Whether the engine watches this transfer for stalls.
    var watchesStall: Bool { hop.request?.stallTimeout != nil }
}
