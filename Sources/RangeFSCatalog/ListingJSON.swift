// A reader for the JSON of directory listings: an array of flat objects whose values are strings, numbers,
// booleans or null (nginx's `autoindex_format json`, Caddy's browse). Foundation's JSONSerialization builds an
// NSDictionary per entry and took most of the time of a first `ls -l` of 100,000 files; this reads the bytes once
// and keeps only the fields a listing uses. Anything else (nested values, bad syntax) returns nil, and the caller
// falls back to the JSON decoder (`JSONValue`), so an unusual listing is read slowly, never wrongly.

import FoundationEssentials

/// One object of a listing array: the fields a listing uses (`Field`), each a string, a number or a boolean.
/// Other keys are read and dropped. Fixed fields, not dictionaries: three dictionaries per object were most of the
/// reading of a 200,000-file listing.
struct ListingObject {
    /// The keys nginx's and Caddy's listings give that a listing reads.
    enum Field: Int, CaseIterable {
        case name, type, isDirectory, size, mtime, modTime, etag

        var key: String {
            switch self {
            case .name: "name"
            case .type: "type"
            case .isDirectory: "is_dir"
            case .size: "size"
            case .mtime: "mtime"
            case .modTime: "mod_time"
            case .etag: "etag"
            }
        }

        /// The field whose key is `bytes`, if any.
        static func named(_ bytes: ArraySlice<UInt8>) -> Field? {
            allCases.first { $0.key.utf8.elementsEqual(bytes) }
        }
    }

    enum Value: Equatable {
        case string(String)
        case number(Double)
        case boolean(Bool)
    }

    private var values: (Value?, Value?, Value?, Value?, Value?, Value?, Value?) = (nil, nil, nil, nil, nil, nil, nil)

    subscript(field: Field) -> Value? {
        get {
            switch field {
            case .name: values.0
            case .type: values.1
            case .isDirectory: values.2
            case .size: values.3
            case .mtime: values.4
            case .modTime: values.5
            case .etag: values.6
            }
        }
        set {
            switch field {
            case .name: values.0 = newValue
            case .type: values.1 = newValue
            case .isDirectory: values.2 = newValue
            case .size: values.3 = newValue
            case .mtime: values.4 = newValue
            case .modTime: values.5 = newValue
            case .etag: values.6 = newValue
            }
        }
    }

    func string(_ field: Field) -> String? {
        if case .string(let text) = self[field] { return text }
        return nil
    }

    func number(_ field: Field) -> Double? {
        if case .number(let number) = self[field] { return number }
        return nil
    }

    func boolean(_ field: Field) -> Bool? {
        if case .boolean(let flag) = self[field] { return flag }
        return nil
    }

    /// The string fields by key (for comparing readers).
    var strings: [String: String] {
        Dictionary(uniqueKeysWithValues: Field.allCases.compactMap { field in string(field).map { (field.key, $0) } })
    }

    /// The number fields by key (for comparing readers).
    var numbers: [String: Double] {
        Dictionary(uniqueKeysWithValues: Field.allCases.compactMap { field in number(field).map { (field.key, $0) } })
    }
}

package enum ListingJSON {
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
                guard let key = key(), take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard index < bytes.count else { return nil }
                // A key given twice keeps its last value, of whatever type, as JSONSerialization did (found by
                // the ListingJSON fuzzer: `"size":"x","size":5` kept both).
                let value: ListingObject.Value?
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard let text = string() else { return nil }
                    value = .string(text)
                case UInt8(ascii: "t"), UInt8(ascii: "f"):
                    guard let flag = literal() else { return nil }
                    value = .boolean(flag)
                case UInt8(ascii: "n"):
                    guard word("null") else { return nil }
                    value = nil
                default:
                    guard let number = number() else { return nil }
                    value = .number(number)
                }
                if case .field(let field) = key { object[field] = value }
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "}")) ? object : nil
        }

        /// What a key names: a field a listing uses, or another.
        enum Key {
            case field(ListingObject.Field)
            case unused
        }

        /// The key at `index`; nil when it is no string. Matched on its bytes when it holds no escape, as every
        /// listing's keys do.
        mutating func key() -> Key? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            var end = index + 1
            while end < bytes.count, bytes[end] >= 0x20, bytes[end] != UInt8(ascii: "\""),
                  bytes[end] != UInt8(ascii: "\\") {
                end += 1
            }
            if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                let field = ListingObject.Field.named(bytes[(index + 1)..<end])
                index = end + 1
                return field.map { .field($0) } ?? .unused
            }
            guard let text = string() else { return nil }
            return ListingObject.Field.named(Array(text.utf8)[...]).map { .field($0) } ?? .unused
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
