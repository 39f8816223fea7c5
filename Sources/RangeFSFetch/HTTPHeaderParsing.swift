// Pure parsing of the HTTP header values rangefs reads: Content-Range and Content-Disposition. Dates
// (System/HTTPDate.swift) and whitespace trimming (System/String+Whitespace.swift) live in System/, as Catalog's
// listings read them too.

import FoundationEssentials
import RangeFSCache
import RangeFSPlatform

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

    init?(parsing text: String) {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.utf8.count >= 6,
              trimmed.utf8.prefix(6).lazy.map({ (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }).elementsEqual("bytes ".utf8)
        else { return nil }
        let spec = trimmed.dropFirst(6).trimmingWhitespace()
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        if parts[1] == "*" {
            completeLength = nil
        } else {
            guard let total = UInt64(parts[1]), total <= Self.largestLength else { return nil }
            completeLength = total
        }
        if parts[0] == "*" {
            range = nil
            return
        }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = UInt64(bounds[0]), let last = UInt64(bounds[1]), first <= last,
              last < Self.largestLength,
              completeLength.map({ last < $0 }) ?? true
        else { return nil }
        range = first..<(last + 1)
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
