// The text of a ListObjectsV2 page as ObjectListingPageReader reads it: the five named references decoded, UTF-8
// checked, a Size's digits, white space trimmed, as ShallowXML and ObjectListingXML do for the same fields.

/// Byte-level helpers of ObjectListingPageReader.

package enum PageText {
    /// Whether `bytes` are UTF-8 (ASCII told without making a string).
    package static func isUTF8(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.allSatisfy { $0 < 0x80 } || String(validating: bytes, as: UTF8.self) != nil
    }

    /// `bytes` without XML white space at either end.
    package static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        guard let first = bytes.firstIndex(where: { !ShallowXML.isSpace($0) }),
              let last = bytes.lastIndex(where: { !ShallowXML.isSpace($0) }) else { return [] }
        return bytes[first...last]
    }

    /// Appends `text` to `out` with its named references decoded (`text()` let no other kind through).
    package static func decode(_ text: ArraySlice<UInt8>, hasReference: Bool, into out: inout [UInt8]) {
        guard hasReference else { return out.append(contentsOf: text) }
        var position = text.startIndex
        while position < text.endIndex {
            if text[position] == UInt8(ascii: "&"), let (byte, length) = namedEntity(text[(position + 1)...]) {
                out.append(byte)
                position += length + 1
            } else {
                out.append(text[position])
                position += 1
            }
        }
    }

    /// The byte a named reference stands for and the length of its name with its `;` (`amp;` is 4), or nil.
    package static func namedEntity(_ rest: ArraySlice<UInt8>) -> (UInt8, Int)? {
        for (name, byte) in entities where rest.starts(with: name) { return (byte, name.count) }
        return nil
    }

    package static let entities: [([UInt8], UInt8)] = [
        (Array("quot;".utf8), UInt8(ascii: "\"")), (Array("amp;".utf8), UInt8(ascii: "&")),
        (Array("lt;".utf8), UInt8(ascii: "<")), (Array("gt;".utf8), UInt8(ascii: ">")),
        (Array("apos;".utf8), UInt8(ascii: "'")),
    ]

    /// As ObjectListingXML reads a Size: decimal digits (white space around them) that `off_t` holds, or nil.
    package static func size(_ text: ArraySlice<UInt8>) -> UInt64? {
        let digits = trimmed(text)
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value <= UInt64(Int64.max) ? value : nil
    }

    /// Whether an XML declaration's attributes name no encoding, or UTF-8 (or ASCII), quoted: otherwise the full
    /// reader decides (ShallowXML refuses any other).
    package static func namesUTF8(_ declaration: ArraySlice<UInt8>) -> Bool {
        guard let found = find(Array("encoding".utf8), in: declaration) else { return true }
        var position = found + 8
        while position < declaration.endIndex,
              ShallowXML.isSpace(declaration[position]) || declaration[position] == UInt8(ascii: "=") {
            position += 1
        }
        guard position < declaration.endIndex,
              declaration[position] == UInt8(ascii: "\"") || declaration[position] == UInt8(ascii: "'"),
              let close = declaration[(position + 1)...].firstIndex(of: declaration[position]) else { return false }
        let encoding = String(decoding: declaration[(position + 1)..<close], as: UTF8.self).lowercased()
        return ["utf-8", "utf8", "us-ascii", "ascii"].contains(encoding)
    }

    /// Appends `text` form-decoded to `out` (`+` a space, then `%XX` a byte), as S3 url-encodes keys; false for a
    /// `%` that escapes nothing. Both readers of a page decode keys here.
    package static func formDecode(_ text: ArraySlice<UInt8>, into out: inout [UInt8]) -> Bool {
        var position = text.startIndex
        while position < text.endIndex {
            switch text[position] {
            case UInt8(ascii: "+"):
                out.append(UInt8(ascii: " "))
                position += 1
            case UInt8(ascii: "%"):
                guard position + 2 < text.endIndex, let high = ShallowXML.hexValue(text[position + 1]),
                      let low = ShallowXML.hexValue(text[position + 2]) else { return false }
                out.append(UInt8(high * 16 + low))
                position += 3
            default:
                out.append(text[position])
                position += 1
            }
        }
        return true
    }

    /// Where `pattern` first occurs in `slice`.

    package static func find(_ pattern: [UInt8], in slice: ArraySlice<UInt8>) -> Int? {
        guard let first = pattern.first, slice.count >= pattern.count else { return nil }
        var position = slice.startIndex
        while let candidate = slice[position...].firstIndex(of: first) {
            guard candidate + pattern.count <= slice.endIndex else { return nil }
            if slice[candidate..<(candidate + pattern.count)].elementsEqual(pattern) { return candidate }
            position = candidate + 1
        }
        return nil
    }
}
