// printf-style formatting, whitespace trimming and percent-decoding: what rangefs used of Foundation's String
// members, kept here so that no target needs Foundation (whose ICU data would be most of a static binary).

import Glibc

/// `format` filled in by the C library's printf (`%.1f`, `%04d`, `%02X`...), as `String(format:)` did. The C
/// locale's decimal point: rangefs never calls setlocale.
public func cFormat(_ format: String, _ arguments: any CVarArg...) -> String {
    // The first call measures, the second writes: a va_list cannot be read twice.
    let length = withVaList(arguments) { vsnprintf(nil, 0, format, $0) }
    guard length >= 0 else { return format }
    var buffer = [CChar](repeating: 0, count: Int(length) + 1)
    _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
    return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension StringProtocol {
    /// The text without the white space (Unicode's, newlines included) at either end.
    /// Inlinable: every response header's value is trimmed here, from another module; a generic not specialised
    /// for its Substring walked the UTF-8 view through witness tables (4,400 instructions a header line, 4.4% of
    /// a cold read of small files).
    @inlinable
    public func trimmed() -> String {
        // Every response header goes through here: its ASCII ends are trimmed byte by byte, with no grapheme
        // breaking (one forward pass: a generic UTF-8 view walks forwards only). A non-ASCII byte where the
        // trimming stops may belong to Unicode white space (U+00A0) or to a combining mark on the last space;
        // those go to the Character test.
        let bytes = utf8
        var start = bytes.startIndex
        while start != bytes.endIndex, isASCIIWhitespace(bytes[start]) { bytes.formIndex(after: &start) }
        guard start != bytes.endIndex else { return "" }
        var end = start, last = start
        var index = start
        while index != bytes.endIndex {
            let next = bytes.index(after: index)
            if !isASCIIWhitespace(bytes[index]) { last = index; end = next }
            index = next
        }
        if bytes[start] < 0x80, bytes[last] < 0x80 { return String(self[start..<end]) }
        return trimmed(while: \.isWhitespace)
    }

    /// The text without the characters at either end for which `predicate` holds.
    @inlinable
    public func trimmed(while predicate: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !predicate($0) }), let last = lastIndex(where: { !predicate($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

/// Tab, line feed, vertical tab, form feed, carriage return and space: ASCII's white space.
@inlinable @inline(__always)
func isASCIIWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }

/// RFC 3986 percent-decoding (invalid escapes and invalid UTF-8 are kept as written), and the encoding of one path
/// segment: the names of listed files become URLs through it (Catalog), and object stores' keys request paths
/// (ObjectStore).
public enum PercentEncoding {
    /// `name` percent-encoded as one path segment, after `base`: unreserved bytes and sub-delimiters, `:` and `@`
    /// stay as they are. One pass over the bytes, from a table: every child of a million-object listing is named
    /// through here (it built a set of the kept bytes per call).
    public static func segment(_ name: String, after base: String = "") -> String {
        var bytes = Array(base.utf8)
        bytes.reserveCapacity(bytes.count + name.utf8.count * 3)
        for byte in name.utf8 {
            if keptInSegment[Int(byte)] {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)
    private static let keptInSegment: [Bool] = {
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@".utf8)
        return (0..<256).map { kept.contains(UInt8($0)) }
    }()

    /// `text` percent-decoded; `text` itself if the result is not UTF-8.
    public static func decode(_ text: String) -> String {
        String(validating: bytes(text), as: UTF8.self) ?? text
    }

    /// The bytes `text` stands for once percent-decoded (any bytes, UTF-8 or not).
    public static func bytes(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            // Two hex digits exactly: UInt8(_:radix:) alone would take `%+f` for 0x0F and `%-0` for NUL.
            if byte == UInt8(ascii: "%"), utf8.count >= 2, let high = hexValue(utf8[utf8.startIndex]),
               let low = hexValue(utf8[utf8.startIndex + 1]) {
                bytes.append(high << 4 | low)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return bytes
    }

    /// The value of one hex digit, or nil.
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
