import Foundation

/// How a URL becomes a file name (DESIGN.md §4): an explicit `name=URL` wins, then Content-Disposition, then the
/// last path segment, percent-decoded; then the result is made safe and unique.
public enum EntryNaming {
    /// The longest name most Linux filesystems accept, in bytes.
    static let maximumLength = 255

    /// The preferred name for `metadata`, before de-duplication.
    public static func preferredName(explicit: String?, metadata: RemoteMetadata) -> String {
        if let explicit, !explicit.isEmpty { return sanitize(explicit) }
        if let suggested = metadata.suggestedName { return sanitize(lastComponent(of: suggested)) }
        return sanitize(lastPathSegment(of: metadata.url))
    }

    /// The last segment of the URL's path, percent-decoded; the host if the path is empty.
    public static func lastPathSegment(of url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        let segments = rest.split(separator: "/", omittingEmptySubsequences: true)
        guard segments.count > 1, let last = segments.last else {
            let host = segments.first.map { String($0.split(separator: "@").last ?? $0) } ?? "download"
            return host.replacingOccurrences(of: ":", with: "_")
        }
        return PercentEncoding.decode(String(last))
    }

    /// Makes `name` a single safe path component: no `/` or NUL, not `.` or `..`, not empty, at most 255 bytes.
    public static func sanitize(_ name: String) -> String {
        var safe = String(name.map { $0 == "/" || $0 == "\0" ? "_" : $0 })
        safe = safe.trimmingWhitespace()
        if safe.isEmpty { safe = "download" }
        if safe == "." || safe == ".." { safe = safe.replacingOccurrences(of: ".", with: "_") }
        while safe.utf8.count > maximumLength { safe.removeLast() }
        return safe
    }

    /// `name`, or `name (2).ext`, `name (3).ext`, ... whichever `isTaken` accepts first.
    public static func unique(_ name: String, isTaken: (String) -> Bool) -> String {
        guard isTaken(name) else { return name }
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let suffix = dot.map { String(name[$0...]) } ?? ""
        var counter = 2
        while true {
            let candidate = "\(stem) (\(counter))\(suffix)"
            if !isTaken(candidate) { return candidate }
            counter += 1
        }
    }

    private static func lastComponent(of name: String) -> String {
        // A server may suggest a path; only its last component names the file.
        String(name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last ?? Substring(name))
    }
}
