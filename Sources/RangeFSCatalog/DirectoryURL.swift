// Where a listing's links lead (DirectoryListing.swift): the direct children of a directory URL only, with the
// path normalised as RFC 3986 says. (The RFC 3339 dates of JSON listings are read in System/RFC3339.swift.)

import RangeFSPlatform

/// A directory's URL split into what a child's link must match.
struct DirectoryURL {
    let scheme: String
    /// Host and port, lowercased, with any credentials left out (they are not part of a link).
    let authority: String
    /// The port implied when the authority names none.
    let defaultPort: String
    /// The URL's own beginning up to the path, as given (credentials included), for children's URLs.
    let prefix: String
    /// The path, ending in `/`, percent-encoded as given.
    let path: String

    init?(_ url: String) {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        let fullAuthority = rest[..<pathStart]
        authority = String(fullAuthority.split(separator: "@").last ?? fullAuthority).lowercased()
        defaultPort = scheme == "https" ? "443" : "80"
        prefix = String(url[..<pathStart])
        var path = String(rest[pathStart...])
        if let query = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = String(path[..<query]) }
        if path.isEmpty { path = "/" }
        if !path.hasSuffix("/") { path += "/" }
        self.path = path
    }

    func child(encodedSegment segment: String, isDirectory: Bool) -> String {
        prefix + path + segment + (isDirectory ? "/" : "")
    }

    enum Child: Equatable {
        /// A direct child: its segment as the link wrote it (percent-encoded), and whether it is a directory.
        case child(segment: String, isDirectory: Bool)
        /// Not a child: another page, the parent, a sort link, another host. Not worth a log line.
        case notAChild
        /// Looked like a child but cannot be one; the reason goes to the log.
        case rejected(String)
    }

    /// Which child, if any, `link` (an href, entities decoded) points at.
    func childSegment(of link: String) -> Child {
        let href = Self.encodingNonASCII(link.trimmed())
        if href.isEmpty || href.hasPrefix("#") || href.contains("?") || href.contains("#") { return .notAChild }
        let lowered = href.lowercased()
        // Links to other kinds of places. Any other `word:` is a file name with a colon: some servers write
        // `co:lon.bin` unescaped, and a directory page has no business linking to odd schemes.
        for scheme in ["mailto:", "javascript:", "data:", "ftp:", "tel:", "file:", "about:", "irc:", "news:", "sms:"]
        where lowered.hasPrefix(scheme) {
            return .notAChild
        }
        var linkPath: String
        if let schemeEnd = href.firstRange(of: "://") {
            guard href[..<schemeEnd.lowerBound].lowercased() == scheme else { return .notAChild }
            let rest = href[schemeEnd.upperBound...]
            let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
            guard sameAuthority(String(rest[..<pathStart])) else { return .notAChild }
            linkPath = String(rest[pathStart...])
        } else if href.hasPrefix("//") {
            let rest = href.dropFirst(2)
            let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
            guard sameAuthority(String(rest[..<pathStart])) else { return .notAChild }
            linkPath = String(rest[pathStart...])
        } else if href.hasPrefix("/") {
            linkPath = href
        } else {
            linkPath = path + href
        }
        guard let normalized = Self.removeDotSegments(linkPath) else { return .notAChild }
        guard normalized.hasPrefix(path), normalized.count > path.count else { return .notAChild }
        var segment = String(normalized.dropFirst(path.count))
        let isDirectory = segment.hasSuffix("/")
        if isDirectory { segment.removeLast() }
        if segment.isEmpty || segment.contains("/") { return .notAChild }  // the directory itself, or deeper
        let decoded = PercentEncoding.bytes(segment)
        if decoded == Array("..".utf8) || decoded == Array(".".utf8) { return .rejected("it names a directory, not a child") }
        if decoded.contains(UInt8(ascii: "/")) { return .rejected("its name holds '/' (%2F)") }
        return .child(segment: segment, isDirectory: isDirectory)
    }

    /// `text` with every non-ASCII byte percent-encoded, as a browser sends a link's IRI. Swift compares Characters,
    /// and `/` or `#` followed by a combining mark (U+0301) is one Character that is neither: in ASCII a Character
    /// is one byte, so the checks here see every `/`, `?` and `#` (found by the ListingHTML fuzzer).
    static func encodingNonASCII(_ text: String) -> String {
        guard !text.utf8.allSatisfy({ $0 < 0x80 }) else { return text }
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in text.utf8 {
            if byte < 0x80 {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func sameAuthority(_ other: String) -> Bool {
        let bare = (other.split(separator: "@").last.map(String.init) ?? other).lowercased()
        func withPort(_ text: String) -> String {
            // "[::1]:8080", "host:8080", "host"
            if let close = text.lastIndex(of: "]") {
                return text[close...].contains(":") ? text : text + ":" + defaultPort
            }
            return text.contains(":") ? text : text + ":" + defaultPort
        }
        return withPort(bare) == withPort(authority)
    }

    /// `path` with `.` and `..` segments resolved (RFC 3986 §5.2.4); nil if it climbs above the root.
    static func removeDotSegments(_ path: String) -> String? {
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                guard !output.isEmpty else { return nil }
                output.removeLast()
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }
}
