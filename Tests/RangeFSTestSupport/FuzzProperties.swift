// The properties of the fuzz targets whose checks are not spelled twice: each harness in Tests/Fuzz calls them
// (bench/fuzz.sh compiles this file into every harness), and FuzzRegressionTests replays the kept inputs through
// the same functions. A function returns the first property its input breaks, or nil. Only RangeFSCore and the
// standard library are used here, so that the fuzz build needs nothing else of this target.

@testable import RangeFSCore

/// The first property of the ResponseHead target that the head `bytes` frame breaks, or nil.
public func responseHeadPropertyBroken(_ bytes: [UInt8]) -> String? {
    let (head, asked) = responseHeadFraming(bytes)
    return responseHeadPropertyBroken(head, asked: asked)
}

/// The first property of the Redaction target that `bytes` break, or nil: as a password, a path and a query value,
/// and as any text.
public func redactionPropertyBroken(_ bytes: [UInt8]) -> String? {
    let (url, secrets) = redactionFraming(bytes)
    if let broken = redactionPropertyBroken(url, secrets: secrets) { return broken }
    let text = String(decoding: bytes, as: UTF8.self)
    let once = Redaction.redact(text)
    return Redaction.redact(once) == once ? nil : "redacting \(text.debugDescription) twice changes it"
}

/// The ResponseHead target's framing: a first line `STATUS FIRST LAST`, then `name: value` lines (lowercased names).
func responseHeadFraming(_ bytes: [UInt8]) -> (ResponseHead, Range<UInt64>) {
    let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
    let first = (lines.first ?? "").split(separator: " ").compactMap { UInt64($0) }
    let status = first.first.map { Int(min($0, 999)) } ?? 206
    let start = first.count > 1 ? min(first[1], UInt64(Int64.max) - 2) : 0
    let last = first.count > 2 ? max(start, min(first[2], UInt64(Int64.max) - 2)) : start + 65_535
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].trimmingWhitespace().lowercased()] = line[line.index(after: colon)...].trimmingWhitespace()
    }
    return (ResponseHead(status: status, headers: headers), start..<(last + 1))
}

/// The ResponseHead target's properties; the first one `head` breaks, or nil.
func responseHeadPropertyBroken(_ head: ResponseHead, asked: Range<UInt64>) -> String? {
    let span = UInt64(asked.count)
    let trusted = head.untrustedBody(expectedLength: span) == nil
    let type = head["content-type"]?.trimmingWhitespace().lowercased() ?? ""
    if trusted && type.hasPrefix("multipart/byteranges") { return "a multipart part was trusted: \(head)" }
    if head.foreignEncoding != nil && (trusted || head.untrustedBody(expectedLength: nil) == nil) {
        return "an encoded body was trusted: \(head)"
    }
    if trusted, head.statesItsLength, UInt64(head["content-length"]?.trimmingWhitespace() ?? "") != span {
        return "a trusted part states another length than its span \(span): \(head)"
    }
    if case .part(let contentRange) = head.carriedBytes(asked: asked), head.status == 200,
       contentRange.range?.lowerBound != asked.lowerBound {
        return "a 200 read as a part of other bytes than asked: \(head)"
    }
    let version = RemoteMetadata(url: "u", size: span, etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "")
    if version.isContradicted(by: version) { return "a version contradicts itself: \(version)" }
    let other = RemoteMetadata(url: "u", size: span, etag: head["x-other-etag"] ?? "", lastModified: head["date"] ?? "")
    if version.isContradicted(by: other) != other.isContradicted(by: version) {
        return "contradiction is not symmetric: \(version) and \(other)"
    }
    return nil
}

/// The Redaction target's framing: three parts split at NUL, a password, a path and a query value; the URL built
/// of them, and the secrets a redacted form must not show (those of four bytes or more that no other part holds).
func redactionFraming(_ bytes: [UInt8]) -> (url: String, secrets: [String]) {
    let parts = bytes.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    // Filtered by scalars: a combining mark after `#` makes one Character of both, which a Character filter keeps.
    let without = { (text: String, banned: String) in
        String(String.UnicodeScalarView(text.unicodeScalars.filter { !banned.unicodeScalars.contains($0) }))
    }
    let clean: (String) -> String = { without($0, "@/?#&\0") }
    let password = clean(parts.first ?? ""), value = clean(parts.count > 2 ? parts[2] : "")
    let path = parts.count > 1 ? without(parts[1], "?#\0") : ""
    let url = "https://user:\(password)@files.example.org/\(path)?token=\(value)&x=1#frag"
    let shown = "https://***@files.example.org/\(path)?token=***&x=***#***"
    let secrets = [password, value].filter { $0.utf8.count >= 4 && !containsBytes(Array(shown.utf8), Array($0.utf8)) }
    return (url, secrets)
}

/// The Redaction target's properties; the first one broken, or nil: no secret is shown, the userinfo and every
/// query value are hidden, and redacting twice gives what redacting once gave. Compared as bytes: a combining mark
/// after a `/` makes one Character of both, which a String comparison would not find as a prefix.
func redactionPropertyBroken(_ url: String, secrets: [String]) -> String? {
    let shown = Redaction.redact(url)
    let bytes = Array(shown.utf8)
    for secret in secrets where containsBytes(bytes, Array(secret.utf8)) {
        return "\(shown.debugDescription) shows \(secret.debugDescription)"
    }
    if !bytes.starts(with: Array("https://***@files.example.org/".utf8)) {
        return "the userinfo shows: \(shown.debugDescription)"
    }
    if Redaction.redact(shown) != shown { return "redacting \(shown.debugDescription) again changes it" }
    return nil
}

/// Whether `needle` occurs in `haystack`, byte for byte.
private func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, needle.count <= haystack.count else { return needle.isEmpty }
    return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
}
