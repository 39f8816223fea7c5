// Proxy groups with CernVM-FS's semantics: `--proxy 'http://p1:3128|http://p2:3128;http://p3:3128'` is an ordered
// chain of groups (`;`), each a set of proxies (`|`) that share the load; `DIRECT` is no proxy.
//
//   - Within the group in use, each request goes to the proxy that rendezvous hashing picks for its URL and block
//     (the highest hash of proxy and key): a group of caching proxies then holds each block once, and when one
//     proxy fails only its share moves.
//   - A proxy that fails (no connection, a timeout, a cut transfer, or an error it made itself: a 5xx with a
//     `Proxy-Status` or `X-Squid-Error` header) is skipped from then on. When every proxy of the group failed, the
//     next group is used. An error from the origin (its 404, its 5xx passed through) is not the proxy's failure.
//   - A request is tried on the whole chain before it fails; when the chain is used up it starts again from the
//     first group, so a later request can still get through.
//   - `resetAfter` seconds after leaving the first group (or after a first failure), the chain goes back to the
//     first group and forgets the failures: the proxies preferred are used again once they recover.

import Dispatch
import RangeFSPlatform
import RangeFSSystem

/// A mount's proxy chain, shared by its engines.
public final class ProxyChain: Sendable {
    /// One proxy of a group: its URL, or nil for DIRECT.
    public struct Proxy: Hashable, Sendable {
        public let url: String?
        var shown: String { url.map(Redaction.redactingProxies) ?? "DIRECT" }
    }

    public let groups: [[Proxy]]
    let resetAfter: Double
    private let clock: @Sendable () -> Double
    private let state = LockedBox(State())

    private struct State {
        var group = 0
        /// Failed proxies, and why.
        var failed: [Proxy: String] = [:]
        /// When the chain left its first state (a failure, or another group), for the reset.
        var since: Double?
        /// Requests sent through each proxy, for status.
        var used: [Proxy: Int] = [:]
    }

    /// Parses `text`; throws a message naming the part that is wrong.
    public init(parsing text: String, resetAfter: Double = 300,
                clock: @escaping @Sendable () -> Double = ProxyChain.now) throws(ProxyChainError) {
        var groups: [[Proxy]] = []
        for group in text.split(separator: ";", omittingEmptySubsequences: false) {
            var proxies: [Proxy] = []
            for part in group.split(separator: "|", omittingEmptySubsequences: false) {
                let item = part.trimmed()
                if item.uppercased() == "DIRECT" {
                    proxies.append(Proxy(url: nil))
                    continue
                }
                let hostPart = item.contains("://") ? String(item[item.firstRange(of: "://")!.upperBound...]) : item
                guard !item.isEmpty, !hostPart.isEmpty, !hostPart.hasPrefix(":"), !item.contains(" ") else {
                    throw ProxyChainError(
                        "invalid --proxy '\(Redaction.redactingProxies(text))': '\(Redaction.redactingProxies(item))' is no proxy; write "
                        + "host:port or http://host:port, '|' between the proxies of a group, ';' between groups, "
                        + "DIRECT for none, e.g. 'http://p1:3128|http://p2:3128;DIRECT'")
                }
                proxies.append(Proxy(url: item))
            }
            groups.append(proxies)
        }
        self.groups = groups
        self.resetAfter = resetAfter
        self.clock = clock
    }

    /// Seconds on the monotonic clock.
    public static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// How many proxies the chain has in all: the most tries a request gets before it fails.
    var count: Int { groups.reduce(0) { $0 + $1.count } }

    /// The proxy for a request with shard key `key` (its URL and block).
    func choose(key: String) -> Proxy {
        let now = clock()
        return state.withLock { state in
            if let since = state.since, now - since >= resetAfter {
                state = State(used: state.used)
            }
            for index in state.group..<groups.count {
                let candidates = groups[index].filter { state.failed[$0] == nil }
                guard !candidates.isEmpty else { continue }
                if index != state.group {
                    state.group = index
                    state.since = state.since ?? now
                }
                let proxy = Self.rendezvous(candidates, key: key)
                state.used[proxy, default: 0] += 1
                return proxy
            }
            // Every proxy failed: start over from the first group (this request already tried the whole chain).
            state = State(used: state.used)
            let proxy = Self.rendezvous(groups[0], key: key)
            state.used[proxy, default: 0] += 1
            return proxy
        }
    }

    /// `proxy` failed; it is skipped until the chain resets.
    func fail(_ proxy: Proxy, reason: String) {
        let now = clock()
        state.withLock { state in
            state.failed[proxy] = reason
            state.since = state.since ?? now
        }
    }

    /// The candidate with the highest hash of itself and `key` (FNV-1a, 64 bits).
    static func rendezvous(_ candidates: [Proxy], key: String) -> Proxy {
        candidates.max { hash($0.url ?? "DIRECT", key) < hash($1.url ?? "DIRECT", key) }!
    }

    private static func hash(_ proxy: String, _ key: String) -> UInt64 {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in proxy.utf8 + [0] + key.utf8 {
            value = (value ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        // FNV's low bits mix poorly for keys that differ only at the end: finish with a 64-bit avalanche.
        value ^= value >> 33
        value &*= 0xff51_afd7_ed55_8ccd
        value ^= value >> 33
        return value
    }

    /// One line for status: each group, the one in use, the proxies that failed and why.
    public var report: String {
        state.withLock { state in
            groups.enumerated().map { index, group in
                let proxies = group.map { proxy -> String in
                    var text = proxy.shown
                    if let reason = state.failed[proxy] { text += " (failed: \(reason))" }
                    if let used = state.used[proxy] { text += " [\(used) requests]" }
                    return text
                }.joined(separator: " | ")
                return (index == state.group ? "in use: " : "") + "group \(index + 1): " + proxies
            }.joined(separator: "; ")
        }
    }
}

/// Why `--proxy` cannot be used, as one line.
public struct ProxyChainError: Error, Equatable, CustomStringConvertible {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
