// What a URL may show. A presigned S3/GCS/Azure URL, and most download links, carry their secret in the query
// (`?X-Amz-Signature=***`, `?sig=***`, `?token=***`), and nothing tells a signature from a file id by its name; so
// every value of the query is hidden, its names stay (they say what kind of URL it is). The fragment is never sent
// to a server, but it can hold a key (`#key=...`, as some share links do): its text is hidden too.
//
// The mark is `***`, as for a hidden `user:password@`, and ASCII on purpose: `getfattr -d` prints a value holding
// any other byte (an ellipsis `…`) as base64, and `*` may stand in a URL's query as it is (RFC 3986).

/// Hides credentials in URLs before they are shown anywhere (logs, xattrs, errors, status).
public enum Redaction {
    /// What replaces each hidden part.
    package static let mark = "***"

    /// `https://user:secret@host/f?token=abc&x=1#k` becomes `https://***@host/f?token=***&x=***#***`: the userinfo is
    /// replaced, the query keeps its names and loses its values, the fragment loses its text. Text without
    /// `scheme://` is unchanged. Applying it twice gives what applying it once gave.
    public static func redact(_ url: String) -> String {
        // Scanned by bytes, not Characters: a combining mark after `/`, `?` or `@` makes one Character of both,
        // and a Character scan then misses the delimiter (a `?` so hidden showed the query's values; found by the
        // Redaction fuzzer). Every delimiter is ASCII, so a byte index is always a scalar boundary.
        let bytes = url.utf8
        guard let schemeEnd = url.firstRange(of: "://")?.upperBound else { return url }
        let isDelimiter = { (byte: UInt8) in byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") }
        let authorityEnd = bytes[schemeEnd...].firstIndex(where: isDelimiter) ?? bytes.endIndex
        var shown = String(url[..<schemeEnd])
        if let at = bytes[schemeEnd..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) {
            shown += mark + url[at..<authorityEnd]
        } else {
            shown += url[schemeEnd..<authorityEnd]
        }
        let fragmentStart = bytes[authorityEnd...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        if let question = bytes[authorityEnd..<fragmentStart].firstIndex(of: UInt8(ascii: "?")) {
            let queryStart = bytes.index(after: question)
            shown += url[authorityEnd..<queryStart]
            shown += hidingValues(url[queryStart..<fragmentStart])
        } else {
            shown += url[authorityEnd..<fragmentStart]
        }
        if fragmentStart < bytes.endIndex {
            shown += bytes.index(after: fragmentStart) < bytes.endIndex ? "#" + mark : "#"
        }
        return shown
    }

    /// `a=1&b=&c` becomes `a=***&b=&***`: every item keeps its name, a value that is not empty becomes the mark, and
    /// an item without `=` (which may be a token itself) becomes the mark. Split by bytes, as `redact` scans.
    package static func hidingValues(_ query: Substring) -> String {
        query.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false).map { item -> String in
            if item.isEmpty { return "" }
            guard let equals = item.firstIndex(of: UInt8(ascii: "=")) else { return mark }
            let afterEquals = item.index(after: equals)
            return afterEquals == item.endIndex ? String(query[item.startIndex..<item.endIndex]) : query[item.startIndex..<afterEquals] + mark
        }.joined(separator: "&")
    }
}

extension Redaction {
    /// `text` holding several URLs, such as a proxy chain `http://u:p@p1|http://u2:p2@p2;http://p3`, with each URL
    /// redacted as `redact` does one: a `|` or `;` followed by `scheme://` starts the next URL. `redact` alone sees
    /// one URL, whose authority would run into the next (`u:p@p1|http:`), and show the second password.
    public static func redactingEach(_ text: String) -> String {
        var pieces: [Substring] = []
        var start = text.startIndex
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(after: index)
            if (text[index] == "|" || text[index] == ";") && startsWithScheme(text[next...]) {
                pieces.append(text[start..<next])
                start = next
            }
            index = next
        }
        pieces.append(text[start...])
        return pieces.map { redact(String($0)) }.joined()
    }

    /// A proxy chain as `--proxy` takes it (`A|B;C`, DIRECT for none), each proxy redacted: also one written
    /// without a scheme, `user:password@host:3128`, which curl takes as an http proxy with a login.
    public static func redactingProxies(_ chain: String) -> String {
        var shown = ""
        var item = ""
        func flush() {
            if item.contains("://") {
                shown += redact(item)
            } else if let at = item.lastIndex(of: "@") {
                shown += mark + item[at...]
            } else {
                shown += item
            }
            item = ""
        }
        for character in chain {
            if character == "|" || character == ";" {
                flush()
                shown.append(character)
            } else {
                item.append(character)
            }
        }
        flush()
        return shown
    }

    /// Whether `text` starts with `scheme://` (RFC 3986: a letter, then letters, digits, `+`, `-` or `.`).
    private static func startsWithScheme(_ text: Substring) -> Bool {
        guard let first = text.first, first.isASCII, first.isLetter else { return false }
        let scheme = text.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        return text[scheme.endIndex...].hasPrefix("://")
    }
}
