// A URL's query is a credential, like its `user:password@`: a presigned URL carries its signature there. So the
// mount knows a file by its URL with the query's values taken out (its identity: the catalog, the cache header,
// the entry's folder name, status, xattrs and logs all hold that), and the real query is kept apart, with the
// other credentials (CredentialTable, saved in the 0600 credentials.json), and put back only on the wire.
//
// Which values leave the identity decides which URLs share a cache entry:
// - The values of parameters that sign or authorize (`X-Amz-*`, `X-Goog-*`, Azure's SAS fields beside `sig`,
//   CloudFront's `Signature`/`Expires`/`Policy`/`Key-Pair-Id`, `token`, ...) are replaced by `***` alone: a
//   presigned URL issued again (a new signature, a new expiry) is the same object, and finds the same cache.
// - Any other value (`?id=42`, `versionId=`) may name the object: it is replaced by `***` and 16 hex digits of the
//   SHA-256 of the item, so `?id=1` and `?id=2` stay two files with two cache entries, while the value itself is
//   written nowhere but credentials.json.
// The entry's validators still guard every byte: a cache entry found under an identity is only served after a
// probe agrees on its size, ETag and date, and every Range request carries If-Range.
// The fragment is never sent, so it is no part of the identity.

import RangeFSPlatform
import RangeFSSystem

/// Splits URLs into the identity a mount knows them by and the query their requests send.
enum URLQuery {
    /// `url`'s identity, and its query (without `?`) when the identity hid values of it (nil when there was
    /// nothing to hide, as for a URL that is an identity already).
    static func split(_ url: String) -> (identity: String, query: String?) {
        guard let schemeEnd = url.firstRange(of: "://") else { return (url, nil) }
        let rest = url[schemeEnd.upperBound...]
        let fragmentStart = rest.firstIndex(of: "#") ?? rest.endIndex
        let beforeFragment = url[..<fragmentStart]
        guard let question = rest[..<fragmentStart].firstIndex(of: "?") else { return (String(beforeFragment), nil) }
        let query = url[url.index(after: question)..<fragmentStart]
        let items = query.split(separator: "&", omittingEmptySubsequences: false)
        let signed = items.contains { name(of: $0).lowercased() == "sig" }
        var hidden = false
        let identityItems = items.map { item -> String in
            guard let kept = identityItem(item, signed: signed) else { return String(item) }
            hidden = true
            return kept
        }
        let identity = String(url[...question]) + identityItems.joined(separator: "&")
        return (identity, hidden ? String(query) : nil)
    }

    /// `identity` with its query replaced by `query`: the URL requests send.
    static func restoring(_ query: String, into identity: String) -> String {
        guard let schemeEnd = identity.firstRange(of: "://"),
              let question = identity[schemeEnd.upperBound...].firstIndex(of: "?") else { return identity }
        return String(identity[...question]) + query
    }

    /// What `item` becomes in the identity; nil when it stays as it is (empty, an empty value, or hidden already).
    private static func identityItem(_ item: Substring, signed: Bool) -> String? {
        let mark = Redaction.mark
        let equals = item.firstIndex(of: "=")
        let value = equals.map { item[item.index(after: $0)...] } ?? item
        if value.isEmpty || isHidden(value) { return nil }
        let prefix = equals.map { String(item[...$0]) } ?? ""
        if equals != nil && isCredential(name(of: item), signed: signed) { return prefix + mark }
        return prefix + mark + SHA256.hexDigest(String(item)).prefix(16)
    }

    /// Whether `value` is what an identity holds: the mark, alone or with 16 hex digits.
    private static func isHidden(_ value: Substring) -> Bool {
        guard value.hasPrefix(Redaction.mark) else { return false }
        let tail = value.dropFirst(Redaction.mark.count)
        return tail.isEmpty || (tail.count == 16 && tail.allSatisfy(\.isHexDigit))
    }

    private static func name(of item: Substring) -> Substring {
        item.prefix { $0 != "=" }
    }

    /// Names whose values sign or authorize a request and change each time a URL is issued, never naming the
    /// object. Azure's two-letter SAS fields count only beside their `sig`, as `sp` or `st` alone may mean anything.
    private static func isCredential(_ name: Substring, signed: Bool) -> Bool {
        let lower = PercentEncoding.decode(String(name)).lowercased()
        if lower.hasPrefix("x-amz-") || lower.hasPrefix("x-goog-") { return true }
        return credentialNames.contains(lower) || (signed && sharedAccessNames.contains(lower))
    }

    private static let credentialNames: Set<String> = [
        "token", "access_token", "auth", "auth_token", "authorization", "apikey", "api_key", "password", "secret",
        "sig", "signature", "expires", "policy", "key-pair-id", "googleaccessid", "md5", "hmac",
    ]

    private static let sharedAccessNames: Set<String> = [
        "sv", "ss", "srt", "sp", "se", "st", "spr", "sip", "si", "sr", "sdd", "skoid", "sktid", "skt", "ske", "sks",
        "skv", "saoid", "suoid", "scid", "rscc", "rscd", "rsce", "rscl", "rsct",
    ]
}
