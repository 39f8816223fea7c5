// A reader for the JSON of directory listings: an array of flat objects whose values are strings, numbers,
// booleans or null (nginx's `autoindex_format json`, Caddy's browse). Foundation's JSONSerialization builds an
// NSDictionary per entry and took most of the time of a first `ls -l` of 100,000 files; this reads the bytes once
// and keeps only the fields a listing uses. Anything else (nested values, bad syntax) returns nil, and the caller
// falls back to the JSON decoder (`JSONValue`), so an unusual listing is read slowly, never wrongly.

import FoundationEssentials

/// One object of a listing array: its string, number and boolean fields.
struct ListingObject {
    var strings: [String: String] = [:]
    var numbers: [String: Double] = [:]
    var booleans: [String: Bool] = [:]
}

enum ListingJSON {
    /// The objects of the JSON array `bytes`, or nil if it is not an array of flat objects.
    static func objects(_ bytes: [UInt8]) -> [ListingObject]? {
        var objects: [ListingObject] = []
        return forEachObject(bytes) { objects.append($0) } ? objects : nil
    }

    /// Hands each object of the JSON array `bytes` to `visit` as it is read, and returns whether `bytes` is an
    /// array of flat objects; when it is not, `visit` may have seen the objects before the fault. One object at a
    /// time: a listing of 100,000 files never holds 100,000 objects (three dictionaries each), and what the caller
    /// keeps of each (its name, its ETag) is not scattered among them, which left the daemon's heap fragmented
    /// long after they were freed.
    static func forEachObject(_ bytes: [UInt8], _ visit: (ListingObject) -> Void) -> Bool {
        var reader = Reader(bytes: bytes)
        return reader.array(visit)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func array(_ visit: (ListingObject) -> Void) -> Bool {
            guard take(UInt8(ascii: "[")) else { return false }
            if !take(UInt8(ascii: "]")) {
                repeat {
                    guard let object = object() else { return false }
                    visit(object)
                } while take(UInt8(ascii: ","))
                guard take(UInt8(ascii: "]")) else { return false }
            }
            skipSpace()
            return index == bytes.count
        }

        mutating func object() -> ListingObject? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var object = ListingObject()
            if take(UInt8(ascii: "}")) { return object }
            repeat {
                skipSpace()
                guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard index < bytes.count else { return nil }
                // A key given twice keeps its last value, of whatever type, as JSONSerialization did (found by
                // the ListingJSON fuzzer: `"size":"x","size":5` kept both).
                object.strings[key] = nil
                object.numbers[key] = nil
                object.booleans[key] = nil
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard let value = string() else { return nil }
                    object.strings[key] = value
                case UInt8(ascii: "t"), UInt8(ascii: "f"):
                    guard let value = literal() else { return nil }
                    object.booleans[key] = value
                case UInt8(ascii: "n"):
                    guard word("null") else { return nil }
                default:
                    guard let value = number() else { return nil }
                    object.numbers[key] = value
                }
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "}")) ? object : nil
        }

        mutating func word(_ text: String) -> Bool {
            let expected = Array(text.utf8)
            guard index + expected.count <= bytes.count, Array(bytes[index..<(index + expected.count)]) == expected
            else { return false }
            index += expected.count
            return true
        }

        mutating func literal() -> Bool? {
            if word("true") { return true }
            if word("false") { return false }
            return nil
        }

        mutating func number() -> Double? {
            let start = index
            while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
            return Double(String(decoding: bytes[start..<index], as: UTF8.self))
        }

        /// A string at `index` (which holds its opening quote), its escapes decoded.
        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            // The common case: no escapes, decoded straight from the bytes.
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
                guard bytes[index] >= 0x20 else { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                return String(validating: bytes[start..<(index - 1)], as: UTF8.self)
            }
            var decoded = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: decoded, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                    case UInt8(ascii: "b"): decoded.append(0x08)
                    case UInt8(ascii: "f"): decoded.append(0x0C)
                    case UInt8(ascii: "n"): decoded.append(0x0A)
                    case UInt8(ascii: "r"): decoded.append(0x0D)
                    case UInt8(ascii: "t"): decoded.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(scalar) {
                            // A surrogate pair: the low half must follow.
                            guard word("\\u"), let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let character = Unicode.Scalar(scalar) else { return nil }
                        decoded.append(contentsOf: Array(String(Character(character)).utf8))
                    default: return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    decoded.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count,
                  let value = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16)
            else { return nil }
            index += 4
            return value
        }
    }
}

/// Any JSON value, read by FoundationEssentials' JSONDecoder: the fallback for what `ListingJSON` does not read.
enum JSONValue: Decodable {
    case string(String)
    case number(Double)
    case boolean(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    /// `bytes` read as JSON, or nil if they are not JSON.
    static func parse(_ bytes: [UInt8]) -> JSONValue? {
        // Bytes that are not JSON are not this kind of listing: nil, and the caller tries the next kind.
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // The value as `type`, or nil when it is of another kind (the next one is tried).
        func value<Value: Decodable>(as type: Value.Type) -> Value? {
            do { return try container.decode(type) } catch { return nil }
        }
        if container.decodeNil() {
            self = .null
        } else if let flag = value(as: Bool.self) {
            self = .boolean(flag)
        } else if let number = value(as: Double.self) {
            self = .number(number)
        } else if let text = value(as: String.self) {
            self = .string(text)
        } else if let values = value(as: [JSONValue].self) {
            self = .array(values)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }
}
