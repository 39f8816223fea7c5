// Credentials live apart from URLs. A URL's `user:password@` and its query's values are split off when the URL
// enters the mount, so the catalog, cache headers, status and logs only ever hold the URL without them (its
// identity, URLQuery); the credentials are kept per origin (scheme, host and port), sent only to that origin, and
// saved for remounts in one 0600 file of the cache. The real query is put back only on the wire (`wire`).
// An object store's origin keeps its access here too (ObjectStore.swift): `s3://` and `gs://` sources become https
// identities when adopted, and each request to the origin is signed on the wire.

import Glibc
import RangeFSObjectStore
import RangeFSPlatform
import RangeFSSystem

/// What requests to one origin authenticate with: a user and password (from a URL's userinfo), and header lines
/// (`--header`, `--cookie`), and the real queries of its URLs.
public struct OriginCredentials: Codable, Sendable, Equatable {
    public var user: String?
    public var password: String?
    public var headers: [String]
    /// The query each URL of this origin sends, by the identity the mount knows the URL by (URLQuery); absent
    /// when none (and in files an older rangefs saved, which had no such field).
    package var queries: [String: String]?
    /// Set when the origin is an object store (absent in files an older rangefs saved).
    var objectStore: ObjectStoreAccess?

    init(user: String? = nil, password: String? = nil, headers: [String] = [], queries: [String: String]? = nil,
         objectStore: ObjectStoreAccess? = nil) {
        self.user = user
        self.password = password
        self.headers = headers
        self.queries = queries
        self.objectStore = objectStore
    }

    var isEmpty: Bool {
        user == nil && password == nil && headers.isEmpty && (queries ?? [:]).isEmpty && objectStore == nil
    }
}

/// The parts of an http(s) URL that credentials hang on.
public enum URLOrigin {
    /// `https://Host:443/x` gives `https://host:443`: scheme and host lowercased, the port always written. Nil for
    /// what is not an http(s) URL with a host.
    /// Read as bytes where the host is ASCII: every request asks it several times (its credentials, its query,
    /// its counters), and by characters it was 3.6% of the daemon's time on a cold read of small files.
    public static func of(_ url: String) -> String? {
        var text = url
        if let origin = text.withUTF8({ asciiOrigin(of: $0) }) { return origin.isEmpty ? nil : origin }
        return split(url)?.origin
    }

    /// What `of` gives for an http(s) URL whose host is ASCII; "" for what has no origin; nil where the host is
    /// not ASCII (lowercased by characters then).
    private static func asciiOrigin(of bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        var schemeEnd = 0
        while schemeEnd + 2 < bytes.count,
              !(bytes[schemeEnd] == colon && bytes[schemeEnd + 1] == slash && bytes[schemeEnd + 2] == slash) {
            schemeEnd += 1
        }
        guard schemeEnd + 2 < bytes.count else { return "" }
        // "http" or "https", in any case.
        let lowered = bytes[..<schemeEnd].map { $0 | 0x20 }
        let secure: Bool
        switch lowered {
        case Array("http".utf8): secure = false
        case Array("https".utf8): secure = true
        default: return ""
        }
        let authorityStart = schemeEnd + 3
        var authorityEnd = authorityStart, hostStart = authorityStart
        while authorityEnd < bytes.count {
            let byte = bytes[authorityEnd]
            if byte == slash || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte >= 0x80 { return nil }
            if byte == UInt8(ascii: "@") { hostStart = authorityEnd + 1 }
            authorityEnd += 1
        }
        // The port follows the last colon, unless a "]" does (an IPv6 address without a port).
        var hostEnd = authorityEnd, portStart = authorityEnd
        var index = authorityEnd
        while index > hostStart {
            index -= 1
            if bytes[index] == UInt8(ascii: "]") { break }
            if bytes[index] == colon {
                hostEnd = index
                portStart = index + 1
                break
            }
        }
        guard hostEnd > hostStart else { return "" }
        var origin: [UInt8] = secure ? Array("https://".utf8) : Array("http://".utf8)
        origin.reserveCapacity(origin.count + (authorityEnd - hostStart) + 6)
        for byte in bytes[hostStart..<hostEnd] { origin.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) }
        origin.append(colon)
        if portStart < authorityEnd {
            origin += bytes[portStart..<authorityEnd]
        } else {
            origin += secure ? Array("443".utf8) : Array("80".utf8)
        }
        return String(decoding: origin, as: UTF8.self)
    }

    /// `url` without its `user:password@`, and the user and password (percent-decoded), if it had them.
    static func removingUserinfo(_ url: String) -> (url: String, user: String?, password: String?) {
        guard let parts = split(url), let userinfo = parts.userinfo else { return (url, nil, nil) }
        let colon = userinfo.firstIndex(of: ":")
        let user = String(userinfo[..<(colon ?? userinfo.endIndex)])
        let password = colon.map { String(userinfo[userinfo.index(after: $0)...]) }
        return (parts.withoutUserinfo, PercentEncoding.decode(user), password.map(PercentEncoding.decode))
    }

    private struct Parts {
        var origin: String
        var userinfo: Substring?
        var withoutUserinfo: String
    }

    private static func split(_ url: String) -> Parts? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let at = authority.lastIndex(of: "@")
        let hostPort = at.map { authority[authority.index(after: $0)...] } ?? authority
        var host = Substring(hostPort)
        var port = scheme == "https" ? "443" : "80"
        if let colon = hostPort.lastIndex(of: ":"), !hostPort[colon...].contains("]") {
            host = hostPort[..<colon]
            let given = hostPort[hostPort.index(after: colon)...]
            if !given.isEmpty { port = String(given) }
        }
        guard !host.isEmpty else { return nil }
        let origin = "\(scheme)://\(host.lowercased()):\(port)"
        let withoutUserinfo = at.map { String(url[..<schemeEnd.upperBound]) + String(rest[rest.index(after: $0)...]) }
        return Parts(origin: origin, userinfo: at.map { authority[..<$0] }, withoutUserinfo: withoutUserinfo ?? url)
    }
}

/// The credentials of every origin of a mount, shared by the transfers (which read them per request) and the
/// control commands (which add to them). Thread-safe.
public final class CredentialTable: Sendable {
    private let table: LockedBox<[String: OriginCredentials]>
    /// What `s3://` and `gs://` sources adopted from now on mean.
    private let objectStoreDefaults = LockedBox(ObjectStoreDefaults())
    /// The key each profile held when its files were last read, and what the files looked like then
    /// (`ObjectStoreKeySource.stamp`): one record per profile, whichever origins and sources use it.
    private let profileKeys = LockedBox([ObjectStoreKeySource: (stamp: [Int64], key: ObjectStoreKey)]())

    public init(_ initial: [String: OriginCredentials] = [:]) {
        table = LockedBox(initial.filter { !$0.value.isEmpty })
    }

    /// What requests to `url`'s origin send; nil if nothing.
    public func credentials(for url: String) -> OriginCredentials? {
        guard let origin = URLOrigin.of(url) else { return nil }
        return table.withLock { $0[origin] }
    }

    /// Splits the userinfo and the query's values off `url` and keeps them for the URL's origin (replacing the
    /// user and password kept before, and the query kept before for the same identity: a presigned URL issued
    /// again); returns the URL's identity, the URL the mount knows the file by. Returns whether that changed the
    /// table, so the caller can save it. An identity comes back as it is, and changes nothing. With `replacing`
    /// false, what is kept already wins: a whole URL from an older catalog never undoes a newer token or login.
    @discardableResult
    public func adopt(_ url: String, replacing: Bool = true) -> (url: String, changed: Bool) {
        if let (identity, access) = ObjectStoreURL.identity(of: url, defaults: objectStoreDefaults.withLock { $0 }),
           let origin = URLOrigin.of(identity) {
            let changed = table.withLock { table -> Bool in
                var entry = table[origin] ?? OriginCredentials()
                guard replacing || entry.objectStore == nil, entry.objectStore != access else { return false }
                entry.objectStore = access
                table[origin] = entry
                return true
            }
            return (identity, changed)
        }
        let split = URLOrigin.removingUserinfo(url)
        let (identity, query) = URLQuery.split(split.url)
        guard split.user != nil || query != nil, let origin = URLOrigin.of(url) else { return (identity, false) }
        let changed = table.withLock { table -> Bool in
            var entry = table[origin] ?? OriginCredentials()
            let before = entry
            if split.user != nil && (replacing || entry.user == nil) {
                entry.user = split.user
                entry.password = split.password
            }
            if let query, replacing || entry.queries?[identity] == nil {
                entry.queries = (entry.queries ?? [:]).merging([identity: query]) { $1 }
            }
            table[origin] = entry
            return entry != before
        }
        return (identity, changed)
    }

    /// What a request for `range` of `url` (an identity, or a redirect's target) sends: the URL with its real
    /// query put back when one is kept for it, and the header lines its origin needs: `If-Range: validator` for a
    /// web server; for an object store, `If-Match` (a changed object answers 412, never another version's bytes)
    /// and the request's signature, made now (it holds the time, so a retry is signed again).
    public func wire(for url: String, range: Range<UInt64>?, validator: String?) -> (url: String, headers: [String]) {
        wire(for: url, range: range, validator: validator, time: Int64(Glibc.time(nil)))
    }

    func wire(for url: String, range: Range<UInt64>?, validator: String?, time: Int64) -> (url: String, headers: [String]) {
        let sent = wireURL(for: url)
        guard let origin = URLOrigin.of(url), let access = table.withLock({ $0[origin]?.objectStore }) else {
            guard let validator, range != nil else { return (sent, []) }
            return (sent, ["If-Range: \(validator)"])
        }
        let signed = ObjectStoreURL.canonical(sent)
        var lines: [String] = []
        if let validator {
            // S3 has no If-Range. An ETag (strong, quoted) must match; a date-only validator must not be exceeded.
            if validator.utf8.first == UInt8(ascii: "\"") {  // a byte: a combining mark may follow the quote
                lines.append("If-Match: \(validator)")
            } else if !validator.hasPrefix("W/") {
                lines.append("If-Unmodified-Since: \(validator)")
            }
        }
        // A presigned URL carries its signature in its query; a second one in a header would be refused.
        let query = signed.firstIndex(of: "?").map { signed[$0...].lowercased() } ?? ""
        let presigned = query.contains("x-amz-signature=") || query.contains("x-amz-credential=")
        // A key kept without its secret (credentials.json keeps none) signs nothing until its profile holds it
        // again; the store's refusal, and the mount's warning, say so.
        if let kept = access.key, !presigned, case let key = currentKey(kept), !key.isMissing {
            lines += SignatureV4.headers(method: "GET", url: signed, headers: [], key: key, region: access.region,
                                         service: access.service, time: time).map { "\($0.name): \($0.value)" }
        }
        return (signed, lines)
    }

    /// The key to sign the next request with: `kept`, or the key its profile holds now when the profile's
    /// files changed since the key was last read from them. Session keys expire, and the AWS tools write the new
    /// one into the same file; a request the store refused with `ExpiredToken` is tried again (FetchError), signed
    /// here with the new key. The first request of a mount reads the files once: a key kept from an earlier mount
    /// may have been replaced since. A key from the environment has no file and is used as it is.
    private func currentKey(_ kept: ObjectStoreKey) -> ObjectStoreKey {
        guard let source = kept.source else { return kept }
        let stamp = source.stamp
        let known = profileKeys.withLock { $0[source] }
        var current = kept
        if let known, known.stamp == stamp {
            current = known.key
        } else if let fresh = source.key, source.stamp == stamp {
            // Stamped again after the read: a file rewritten in place may be read half-written, and is read anew
            // at the next request instead. A profile that lost its key (emptied, or half written) leaves the key
            // at hand in use, and is read again once it changes.
            profileKeys.withLock { $0[source] = (stamp, fresh) }
            current = fresh
        } else if let known {
            current = known.key
        }
        guard current != kept else { return kept }
        // Every origin, and the defaults that later sources (`rangefs add`) take, move to the profile's key: a
        // source adopted with the key of the mount's start must not bring an expired one back.
        table.withLock { table in
            for (origin, entry) in table where entry.objectStore?.key?.source == source {
                table[origin]?.objectStore?.key = current
            }
        }
        objectStoreDefaults.withLock { defaults in
            if defaults.key?.source == source { defaults.key = current }
            if defaults.googleKey?.source == source { defaults.googleKey = current }
        }
        return current
    }

    /// The URL a request for `url` (an identity, or a redirect's target) sends: with its real query put back when
    /// one is kept for it, else `url` itself.
    package func wireURL(for url: String) -> String {
        guard let origin = URLOrigin.of(url),
              let query = table.withLock({ $0[origin]?.queries?[url] }) else { return url }
        return URLQuery.restoring(query, into: url)
    }

    /// Stops keeping the query of `url` (a file removed from the mount); returns whether there was one.
    @discardableResult
    package func forgetQuery(of url: String) -> Bool {
        guard let origin = URLOrigin.of(url) else { return false }
        return table.withLock { table -> Bool in
            guard var entry = table[origin], entry.queries?.removeValue(forKey: url) != nil else { return false }
            if entry.queries?.isEmpty == true { entry.queries = nil }
            table[origin] = entry.isEmpty ? nil : entry
            return true
        }
    }

    /// Puts back what `before` (a `snapshot` taken before `adopt(url)`) held for `url`: the query of its identity
    /// and, with `login`, its origin's user and password. Undoes the adoption of a URL whose add failed, so a token
    /// that reached no file is neither sent nor saved. Only what still is as `url` set it is put back: what
    /// another URL adopted since stays.
    package func restore(_ url: String, from before: [String: OriginCredentials], login: Bool) {
        let split = URLOrigin.removingUserinfo(url)
        let (identity, query) = URLQuery.split(split.url)
        guard split.user != nil || query != nil, let origin = URLOrigin.of(url) else { return }
        let previous = before[origin]
        table.withLock { table in
            guard var entry = table[origin] else { return }
            if login, split.user != nil, entry.user == split.user, entry.password == split.password {
                entry.user = previous?.user
                entry.password = previous?.password
            }
            if let query, entry.queries?[identity] == query {
                var queries = entry.queries ?? [:]
                queries[identity] = previous?.queries?[identity]
                entry.queries = queries.isEmpty ? nil : queries
            }
            table[origin] = entry.isEmpty ? nil : entry
        }
    }

    /// Sends `headers` to `url`'s origin from now on, instead of the headers given for it before.
    public func setHeaders(_ headers: [String], for url: String) {
        guard let origin = URLOrigin.of(url) else { return }
        table.withLock { table in
            var entry = table[origin] ?? OriginCredentials()
            entry.headers = headers
            table[origin] = entry.isEmpty ? nil : entry
        }
    }

    /// Sets what `s3://` and `gs://` sources adopted from now on mean: the endpoint (nil: AWS's), the region, path
    /// style or virtual-hosted (nil: path style for an endpoint given, else virtual-hosted where the bucket's name
    /// allows), and the key requests are signed with. A key given (or `anonymous`) also replaces the key that the
    /// origins of the same endpoint kept from an earlier mount; with neither, what was kept stays.
    /// A key read from a profile names it as `keySource`, so that it is read again when the profile's files change.
    /// `googleKey` signs `gs://` sources (an HMAC key of Google Cloud Storage's, from `googleKeySource`); it
    /// replaces the key kept for Google's origin, and no other key is ever sent there.
    package func setObjectStore(endpoint: String?, region: String?, pathStyle: Bool?,
                                key: (id: String, secret: String, token: String?)?, keySource: ObjectStoreKeySource? = nil,
                                googleKey: (id: String, secret: String, token: String?)? = nil,
                                googleKeySource: ObjectStoreKeySource? = nil, anonymous: Bool) {
        func made(_ key: (id: String, secret: String, token: String?)?, _ source: ObjectStoreKeySource?) -> ObjectStoreKey? {
            key.map { key in
                var made = ObjectStoreKey(accessKeyID: key.id, secretAccessKey: key.secret, sessionToken: key.token)
                made.source = source
                return made
            }
        }
        let given = made(key, keySource)
        let google = made(googleKey, googleKeySource)
        objectStoreDefaults.withLock { defaults in
            defaults = ObjectStoreDefaults(endpoint: endpoint, region: region ?? "us-east-1", pathStyle: pathStyle,
                                           key: given, googleKey: google)
        }
        if let google, let googleOrigin = URLOrigin.of(ObjectStoreURL.googleEndpoint) {
            table.withLock { table in
                if table[googleOrigin]?.objectStore != nil { table[googleOrigin]?.objectStore?.key = google }
            }
        }
        guard given != nil || anonymous else { return }
        // Only the origins of this endpoint (AWS's when none is given) take the key: an origin kept from a mount of
        // another store must never be sent this key's id or token.
        let endpointOrigin = endpoint.flatMap(URLOrigin.of)
        table.withLock { table in
            for (origin, entry) in table where entry.objectStore != nil
                && (endpointOrigin.map { $0 == origin } ?? origin.hasSuffix(".amazonaws.com:443")) {
                table[origin]?.objectStore?.key = given
            }
        }
    }

    /// Gives every object-store origin whose key was read back from credentials.json, without its secret, the key
    /// it signs with now: a profile's key is read again from the profile; a key that came from the environment
    /// becomes `given`, the key this mount found (the environment, else a profile), never for Google's origin,
    /// which takes only its own key. Returns the origins left without a key, with the key each had.
    package func takeKeptKeys(given: (id: String, secret: String, token: String?)?,
                              givenSource: ObjectStoreKeySource?) -> [(origin: String, key: String)] {
        let googleOrigin = URLOrigin.of(ObjectStoreURL.googleEndpoint)
        return table.withLock { table in
            var missing: [(origin: String, key: String)] = []
            for (origin, entry) in table.sorted(by: { $0.key < $1.key }) {
                guard let kept = entry.objectStore?.key, kept.isMissing else { continue }
                var key = kept.source?.key
                if key == nil, kept.source == nil, origin != googleOrigin, let given {
                    key = ObjectStoreKey(accessKeyID: given.id, secretAccessKey: given.secret, sessionToken: given.token)
                    key?.source = givenSource
                }
                if let key {
                    table[origin]?.objectStore?.key = key
                } else {
                    missing.append((origin, kept.source.map { "the key of profile \($0.profile) in \($0.credentialsFile)" }
                                        ?? "access key \(kept.accessKeyID), from the environment"))
                }
            }
            return missing
        }
    }

    /// The identity `adopt(url)` gives, without adopting anything.
    package func identity(of url: String) -> String {
        if let (identity, _) = ObjectStoreURL.identity(of: url, defaults: objectStoreDefaults.withLock { $0 }) {
            return identity
        }
        return URLQuery.split(URLOrigin.removingUserinfo(url).url).identity
    }

    /// The access of `url`'s origin when it is an object store.
    package func objectStore(for url: String) -> ObjectStoreAccess? {
        guard let origin = URLOrigin.of(url) else { return nil }
        return table.withLock { $0[origin]?.objectStore }
    }

    /// Every origin's credentials, for saving.
    public var snapshot: [String: OriginCredentials] { table.withLock { $0 } }
}
