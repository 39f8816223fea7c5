// Little-endian, fixed-width encoding for the on-disk cache format. Never raw C structs: every field is written
// and read one by one, so the format does not depend on the compiler's layout or the machine's byte order.

/// Appends little-endian fixed-width fields to a byte buffer.
package struct ByteWriter {
    /// The encoded bytes so far.
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func write(_ value: UInt32) {
        // SAFETY: the value's bytes are copied out inside the closure.
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func write(_ value: UInt64) {
        // SAFETY: the value's bytes are copied out inside the closure.
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func write(raw: some Sequence<UInt8>) {
        bytes.append(contentsOf: raw)
    }

    /// A string as a 32-bit length followed by its UTF-8 bytes.
    package mutating func write(string: String) {
        let utf8 = Array(string.utf8)
        write(UInt32(utf8.count))
        bytes.append(contentsOf: utf8)
    }
}

/// Reads little-endian fixed-width fields; every read fails cleanly on truncated input.
package struct ByteReader {
    private let bytes: [UInt8]
    /// The offset of the next unread byte.
    private(set) var position: Int = 0

    package init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    package var remaining: Int { bytes.count - position }

    package mutating func readUInt32() throws(FormatError) -> UInt32 {
        let raw = try readBytes(4)
        return raw.reversed().reduce(0) { ($0 << 8) | UInt32($1) }
    }

    package mutating func readUInt64() throws(FormatError) -> UInt64 {
        let raw = try readBytes(8)
        return raw.reversed().reduce(0) { ($0 << 8) | UInt64($1) }
    }

    package mutating func readBytes(_ count: Int) throws(FormatError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw .truncated }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    /// A string written by `ByteWriter.write(string:)`, at most `limit` bytes long.
    package mutating func readString(limit: Int = 1 << 20) throws(FormatError) -> String {
        let length = Int(try readUInt32())
        guard length <= limit else { throw .fieldTooLong }
        let raw = try readBytes(length)
        guard let string = String(validating: raw, as: UTF8.self) else { throw .invalidText }
        return string
    }
}

/// Why a cache file could not be decoded. Any of these makes the entry empty; none is fatal.
package enum FormatError: Error, Equatable, Sendable {
    case truncated
    case badMagic
    case unsupportedVersion(UInt32)
    case checksumMismatch
    case fieldTooLong
    case invalidText
    case inconsistent(String)
}
