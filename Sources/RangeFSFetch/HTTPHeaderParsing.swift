// Pure parsing of the HTTP header values rangefs reads: Content-Range and Content-Disposition. Dates
// (System/HTTPDate.swift) and whitespace trimming (System/String+Whitespace.swift) live in System/, as Catalog's
// listings read them too.

import FoundationEssentials
import RangeFSCache
import RangeFSPlatform
import RangeFSSystem

/// A parsed `Content-Range: bytes first-last/complete` (complete may be `*`), or `bytes */complete`.
struct ContentRange: Equatable, Sendable {
    /// The bytes this response carries, nil for the unsatisfied form `bytes */N`.
    var range: Range<UInt64>?
    var completeLength: UInt64?

    /// The largest length a file can have: an `off_t`. A server's larger number is not a length (it would
    /// overflow the cache's block arithmetic and stop the mount; found by the CacheRecords fuzzer).
    static let largestLength = RemoteMetadata.largestSize

    init(range: Range<UInt64>?, completeLength: UInt64?) {
        self.range = range
        self.completeLength = completeLength
    }

    /// Read on its bytes, in place: every response is read through here three times (its carried bytes), and a
    /// parse by Character (grapheme breaking for `dropFirst` and each `split`) cost 15,000 instructions, 5% of a
    /// cold read of small files. The separators and white space are ASCII, so what is cut at their bytes is cut at
    /// character boundaries; a number is read as `UInt64(_:)` reads one (a sign, then digits only), so anything else
    /// in it, a combining mark included, refuses the header.
    init?(parsing text: String) {
        var text = text
        guard let parsed = text.withUTF8({ Self.parse($0) }) else { return nil }
        self = parsed
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> ContentRange? {
        // White space as `trimmingWhitespace` takes it: spaces and tabs before, those and line ends after.
        func isLeading(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        func isTrailing(_ byte: UInt8) -> Bool { isLeading(byte) || byte == 0x0D || byte == 0x0A }
        var start = 0, end = bytes.count
        while start < end, isLeading(bytes[start]) { start += 1 }
        while end > start, isTrailing(bytes[end - 1]) { end -= 1 }
        guard end - start >= 6 else { return nil }
        for (offset, expected) in "bytes ".utf8.enumerated() {
            let byte = bytes[start + offset]
            guard ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) == expected else { return nil }
        }
        start += 6
        while start < end, isLeading(bytes[start]) { start += 1 }
        guard let slash = separator(UInt8(ascii: "/"), in: bytes, start..<end) else { return nil }
        var completeLength: UInt64?
        if !isStar(bytes, (slash + 1)..<end) {
            guard let total = bytes.decimalNumber(in: (slash + 1)..<end), total <= largestLength else { return nil }
            completeLength = total
        }
        if isStar(bytes, start..<slash) { return ContentRange(range: nil, completeLength: completeLength) }
        guard let dash = separator(UInt8(ascii: "-"), in: bytes, start..<slash),
              let first = bytes.decimalNumber(in: start..<dash),
              let last = bytes.decimalNumber(in: (dash + 1)..<slash), first <= last,
              last < largestLength, completeLength.map({ last < $0 }) ?? true
        else { return nil }
        return ContentRange(range: first..<(last + 1), completeLength: completeLength)
    }

    /// Where the one `byte` in `range` of `bytes` is: nil when there is none or more than one.
    private static func separator(_ byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        var found: Int?
        for index in range where bytes[index] == byte {
            guard found == nil else { return nil }
            found = index
        }
        return found
    }

    private static func isStar(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        range.count == 1 && bytes[range.lowerBound] == UInt8(ascii: "*")
    }
}

/// The filename parameter of a Content-Disposition header (RFC 6266), preferring `filename*`.
enum ContentDisposition {
    static func filename(from header: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in splitParameters(header).dropFirst() {
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let key = parameter[..<equals].trimmingWhitespace().lowercased()
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if key == "filename*" {
                // charset'language'percent-encoded
                let pieces = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                if pieces.count == 3 { extended = PercentEncoding.decode(String(pieces[2])) }
            } else if key == "filename" {
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast()).replacing("\\\"", with: "\"")
                }
                plain = value
            }
        }
        let name = extended ?? plain
        return (name?.isEmpty ?? true) ? nil : name
    }

    /// Splits on `;` outside double quotes.
    private static func splitParameters(_ header: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false
        for character in header {
            if character == "\"" { quoted.toggle() }
            if character == ";" && !quoted {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        return parts
    }
}
