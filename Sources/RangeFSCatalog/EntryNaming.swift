import RangeFSCache
import RangeFSPlatform

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
    static func lastPathSegment(of url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        let segments = rest.split(separator: "/", omittingEmptySubsequences: true)
        guard segments.count > 1, let last = segments.last else {
            let host = segments.first.map { String($0.split(separator: "@").last ?? $0) } ?? "download"
            return host.replacing(":", with: "_")
        }
        return PercentEncoding.decode(String(last))
    }

    /// Makes `name` a single safe path component: no `/` or control character (NUL, newline, tab, ...), not `.`
    /// or `..`, not empty, at most 255 bytes.
    static func sanitize(_ name: String) -> String {
        shorten(makeSafe(name), to: maximumLength)
    }

    /// The name `preferredName` would give before cutting it to 255 bytes, if it had to be cut: for a warning.
    public static func overlongName(explicit: String?, metadata: RemoteMetadata) -> String? {
        let whole: String
        if let explicit, !explicit.isEmpty {
            whole = makeSafe(explicit)
        } else if let suggested = metadata.suggestedName {
            whole = makeSafe(lastComponent(of: suggested))
        } else {
            whole = makeSafe(lastPathSegment(of: metadata.url))
        }
        return whole.utf8.count > maximumLength ? whole : nil
    }

    /// Why `name`, given by the user as `NAME=URL`, cannot name a file in the mount; nil if it can.
    public static func problem(withExplicitName name: String) -> String? {
        if name.contains("/") { return "it contains '/'; a name is one file name, not a path" }
        if name.contains("\0") { return "it contains a NUL byte" }
        if DirectoryListing.holdsControlCharacter(name) {
            return "it contains a control character (newline, tab, ...), which line-based tools cannot handle"
        }
        if name == "." || name == ".." { return "'\(name)' names a directory" }
        return nil
    }

    /// `name` without `/` or control characters, trimmed, not empty, not `.` or `..`; any length.
    private static func makeSafe(_ name: String) -> String {
        // Most names (every one of a 100,000-file listing) need nothing: checked byte by byte, without copies.
        if isSafeAsIs(name.utf8) { return name }
        var safe = ""
        for scalar in name.unicodeScalars {
            let unsafe = scalar == "/" || scalar.value < 0x20 || scalar.value == 0x7F
            safe.unicodeScalars.append(unsafe ? "_" : scalar)
        }
        safe = safe.trimmingWhitespace()
        if safe.isEmpty { safe = "download" }
        if safe == "." || safe == ".." { safe = safe.replacing(".", with: "_") }
        return safe
    }

    /// Whether `bytes` are a name `makeSafe` leaves as it is at a glance: printable ASCII at both ends, no `/` or
    /// control character, not `.` or `..`.
    private static func isSafeAsIs<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard let first = bytes.first, let last = bytes.last, first > 0x20, last > 0x20, first < 0x7F, last < 0x7F,
              bytes.count > 2 || bytes.contains(where: { $0 != UInt8(ascii: ".") }) else { return false }
        return !bytes.contains { $0 == UInt8(ascii: "/") || $0 < 0x20 || $0 == 0x7F }
    }

    /// Whether `bytes` name a file in the mount as they are: UTF-8 that `sanitize` keeps whole (at most 255 bytes,
    /// `makeSafe` leaves it) and that `DirectoryListing` neither skips nor leaves out as a control name. What a
    /// listing added whole (PlainListing.swift) asks of each name, without making it a string.
    static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count <= maximumLength, isSafeAsIs(bytes) else { return false }
        return !bytes.contains { $0 >= 0x80 } || String(validating: bytes, as: UTF8.self) != nil
    }

    /// `name` cut to at most `bytes` bytes of UTF-8, at a character boundary (never inside a multi-byte
    /// character).
    static func shorten(_ name: String, to bytes: Int) -> String {
        guard name.utf8.count > bytes else { return name }
        var length = 0
        var end = name.startIndex
        for index in name.indices {
            let next = name[index].utf8.count
            if length + next > bytes { break }
            length += next
            end = name.index(after: index)
        }
        return String(name[..<end])
    }

    /// `name`, or `name (2).ext`, `name (3).ext`, ... whichever `isTaken` accepts first; the stem is shortened
    /// so that the result stays within 255 bytes.
    static func unique(_ name: String, isTaken: (String) -> Bool) -> String {
        guard isTaken(name) else { return name }
        var dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        // An "extension" too long to keep beside a counter is part of the stem.
        if let found = dot, name[found...].utf8.count > maximumLength / 2 { dot = nil }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let suffix = dot.map { String(name[$0...]) } ?? ""
        var counter = 2
        while true {
            let marker = " (\(counter))"
            let room = maximumLength - marker.utf8.count - suffix.utf8.count
            let candidate = shorten(stem, to: room) + marker + suffix
            if !isTaken(candidate) { return candidate }
            counter += 1
        }
    }

    private static func lastComponent(of name: String) -> String {
        // A server may suggest a path; only its last component names the file.
        String(name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last ?? Substring(name))
    }
}
