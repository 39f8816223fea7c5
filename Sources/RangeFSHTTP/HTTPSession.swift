// What the engines of one mount share: the options, the credentials per origin, the redirect targets they found,
// and which proxy a URL goes through (to name it when it fails).

import FoundationEssentials
import RangeFSFetch
import RangeFSPlatform
import RangeFSSystem

/// Shared by every engine of a mount (readers' and background), so that one learns a redirect for all.
public final class HTTPSession: Sendable {
    public let options: HTTPOptions
    public let credentials: CredentialTable
    let redirects = RedirectMemory()
    /// The proxy groups of `--proxy` (one group of one proxy for a plain `--proxy URL`); nil without `--proxy`.
    public let proxyChain: ProxyChain?
    private let environment: [String: String]
    /// Whether any request could go through a proxy (`--proxy`, or a proxy variable set): without one, naming a
    /// response's proxy costs no parse of its URL (it was a few percent of the daemon's CPU per small file).
    private let mayUseProxy: Bool

    public init(options: HTTPOptions = HTTPOptions(), credentials: CredentialTable = CredentialTable(),
                environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.options = options
        self.credentials = credentials
        self.environment = environment
        mayUseProxy = options.proxy != nil
            || ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].contains { environment[$0]?.isEmpty == false }
        // The mount validated --proxy already; a value that does not parse is handed to libcurl as it is.
        proxyChain = try? options.proxy.map { text throws(ProxyChainError) in
            try ProxyChain(parsing: text, resetAfter: Double(options.proxyResetAfter))
        }
    }

    /// The proxy of the chain for a request of `url` at byte `offset`, or nil when the chain is not used for it
    /// (no `--proxy`, or `--noproxy`/`no_proxy` names its host).
    func chainProxy(for url: String, offset: UInt64) -> ProxyChain.Proxy? {
        guard let proxyChain, let origin = URLOrigin.of(url), !bypassesProxy(origin) else { return nil }
        // Shards of 4 MiB: a request resumed inside one goes to the same proxy.
        return proxyChain.choose(key: url + "#" + String(offset >> 22))
    }

    /// The proxy a request for `url` goes through, without its credentials, or nil: `--proxy`, else the
    /// environment libcurl reads (`http_proxy` for http, `https_proxy`/`HTTPS_PROXY` for https, then
    /// `all_proxy`/`ALL_PROXY`), unless `--noproxy`/`no_proxy` names the host.
    public func proxy(for url: String) -> String? {
        guard mayUseProxy, let origin = URLOrigin.of(url), !bypassesProxy(origin) else { return nil }
        let https = origin.hasPrefix("https:")
        let candidates = https ? ["https_proxy", "HTTPS_PROXY"] : ["http_proxy"]
        let proxy = options.proxy ?? (candidates + ["all_proxy", "ALL_PROXY"]).lazy
            .compactMap { self.environment[$0] }.first { !$0.isEmpty }
        guard let proxy, !proxy.isEmpty else { return nil }
        return Redaction.redactingProxies(proxy)
    }

    /// Whether `--noproxy` (else `no_proxy`) names the host of `origin` (`scheme://host:port`).
    private func bypassesProxy(_ origin: String) -> Bool {
        let https = origin.hasPrefix("https:")
        let host = String(origin.dropFirst(https ? 8 : 7).split(separator: ":").dropLast().joined(separator: ":"))
        let exceptions = options.noProxy ?? environment["no_proxy"] ?? environment["NO_PROXY"] ?? ""
        return Self.matches(host: host, noProxy: exceptions)
    }

    /// Whether `host` is in a no_proxy list (`*`, or comma-separated names that match it or a domain it is in).
    static func matches(host: String, noProxy: String) -> Bool {
        let host = host.lowercased()
        for entry in noProxy.split(separator: ",") {
            var name = entry.trimmed().lowercased()
            if name == "*" { return true }
            if name.hasPrefix(".") { name.removeFirst() }
            if !name.isEmpty && (host == name || host.hasSuffix("." + name)) { return true }
        }
        return false
    }
}

/// Where each URL redirected to, so that later requests go straight there: one round trip fewer each. A target
/// is asked again when it expires (a presigned URL's own expiry), or when it answers 401, 403, 404 or 410.
final class RedirectMemory: Sendable {
    private struct Target {
        var url: String
        var expires: Date?
    }

    private let targets = LockedBox<[String: Target]>([:])
    /// A target is not used in the last seconds of its life, so a request never starts just as it expires.
    static let expiryMargin: TimeInterval = 5

    /// The target to request instead of `url`, if one is known and not about to expire.
    func target(for url: String, now: Date = Date()) -> String? {
        targets.withLock { targets in
            guard let target = targets[url] else { return nil }
            if let expires = target.expires, expires.timeIntervalSince(now) < Self.expiryMargin {
                targets[url] = nil
                return nil
            }
            return target.url
        }
    }

    func remember(_ target: String, for url: String) {
        guard target != url else { return }
        targets.withLock { $0[url] = Target(url: target, expires: Self.expiry(of: target)) }
    }

    func forget(_ url: String) {
        _ = targets.withLock { $0.removeValue(forKey: url) }
    }

    /// When a signed URL stops working, from its query: `X-Amz-Date` + `X-Amz-Expires` (S3 and its kin),
    /// `X-Goog-Date` + `X-Goog-Expires` (Google Cloud Storage), or `Expires` in seconds since 1970 (CloudFront,
    /// older signatures). Nil when it says nothing.
    static func expiry(of url: String) -> Date? {
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        var items: [String: String] = [:]
        for pair in query.split(separator: "#").first?.split(separator: "&") ?? [] {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            items[String(parts[0]).lowercased()] = PercentEncoding.decode(String(parts[1]))
        }
        for vendor in ["amz", "goog"] {
            if let date = items["x-\(vendor)-date"].flatMap(parseCompactDate),
               let seconds = items["x-\(vendor)-expires"].flatMap(TimeInterval.init) {
                return date.addingTimeInterval(seconds)
            }
        }
        return items["expires"].flatMap(TimeInterval.init).map(Date.init(timeIntervalSince1970:))
    }

    /// `20260101T120000Z`.
    private static func parseCompactDate(_ text: String) -> Date? {
        try? Date.ISO8601FormatStyle(dateSeparator: .omitted, timeSeparator: .omitted, timeZone: .gmt).parse(text)
    }
}
