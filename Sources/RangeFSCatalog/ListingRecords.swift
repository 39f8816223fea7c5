// A listing as rangefs writes it for itself: an object store's pages, gathered, and the listing kept for an
// offline remount (`listings/`). Issue 46: a million objects went through five forms (XML, a tree, a page, JSON
// text, a parsed listing), and the kept listing was 122 MB of JSON that an offline remount parsed whole, three
// dictionaries per object, before `ls` showed anything (57 s). Each child is now one binary record, written as its
// page is read and read back with no text parsing at all.
//
// Layout (little-endian):
//   magic      8 bytes   00 'R' 'F' 'S' 'L' 'S' 'T' 01 (the last byte is the version)
//   records    one per child, in listing order:
//                flags   1 byte   bit 0 directory, 1 size, 2 date, 3 ETag, 4 date to the second
//                name    LEB128 length, then its UTF-8 bytes
//                size    LEB128              (if bit 1)
//                date    zigzag LEB128 seconds since 1970 (if bit 2)
//                ETag    LEB128 length, then its bytes, quoted as the listing gave it (if bit 3)
//   trailer    record count (4 bytes), CRC32C of everything before it (4 bytes)
//
// A NUL first byte: no web server's listing is taken for one (`DirectoryListing.isText` refuses a NUL), and a
// file that is not one is told at once. The CRC and the count make a torn or damaged file no listing (the
// directory is listed from its server again) rather than a listing that lacks its last children. What a record
// states is read by the same rules as a JSON listing's (DirectoryListing.EntryGatherer): a server that wrote
// these bytes itself gains nothing it could not state in JSON.
import RangeFSSystem

/// Encodes and reads listings as binary records.
package enum ListingRecords {
    static let magic: [UInt8] = [0x00, 0x52, 0x46, 0x53, 0x4C, 0x53, 0x54, 0x01]
    private static let trailerLength = 8

    /// One child as a record states it.
    struct Record: Equatable {
        var name: String
        var isDirectory = false
        var size: UInt64?
        var modificationTime: Int64?
        var datePrecision = ListedPrecision.second
        var etag: String?
    }

    private enum Flag {
        static let directory: UInt8 = 1
        static let size: UInt8 = 2
        static let date: UInt8 = 4
        static let etag: UInt8 = 8
        static let secondPrecision: UInt8 = 16
        static let known: UInt8 = 31
    }

    /// Records being written, without the magic and the trailer: an object listing gathers its folders and its
    /// files in two of these and joins them at the end (`joined`).
    package struct Writer {
        package private(set) var bytes: [UInt8] = []
        private(set) var count = 0

        package init() {}

        /// Appends one child.
        package mutating func append(name: String, isDirectory: Bool, size: UInt64? = nil, modificationTime: Int64? = nil,
                             datePrecision: ListedPrecision = .second, etag: String? = nil) {
            var flags: UInt8 = isDirectory ? Flag.directory : 0
            if size != nil { flags |= Flag.size }
            if modificationTime != nil { flags |= Flag.date }
            if etag != nil { flags |= Flag.etag }
            if datePrecision == .second { flags |= Flag.secondPrecision }
            bytes.append(flags)
            appendText(name)
            if let size { appendNumber(size) }
            if let modificationTime {
                appendNumber(UInt64(bitPattern: (modificationTime << 1) ^ (modificationTime >> 63)))
            }
            if let etag { appendText(etag) }
            count += 1
        }

        /// Appends one file of an object store's page, from its bytes (ObjectListingPageReader): the same record
        /// as `append(name:isDirectory:size:modificationTime:datePrecision:etag:)` with a date to the second and the
        /// ETag quoted, with no string made for either.
        package mutating func appendFile(name: ArraySlice<UInt8>, size: UInt64?, modificationTime: Int64?,
                                 unquotedETag etag: ArraySlice<UInt8>?) {
            var flags: UInt8 = Flag.secondPrecision
            if size != nil { flags |= Flag.size }
            if modificationTime != nil { flags |= Flag.date }
            if etag != nil { flags |= Flag.etag }
            bytes.append(flags)
            appendNumber(UInt64(name.count))
            bytes.append(contentsOf: name)
            if let size { appendNumber(size) }
            if let modificationTime {
                appendNumber(UInt64(bitPattern: (modificationTime << 1) ^ (modificationTime >> 63)))
            }
            if let etag {
                appendNumber(UInt64(etag.count + 2))
                bytes.append(UInt8(ascii: "\""))
                bytes.append(contentsOf: etag)
                bytes.append(UInt8(ascii: "\""))
            }
            count += 1
        }

        mutating func append(_ record: Record) {
            append(name: record.name, isDirectory: record.isDirectory, size: record.size,
                   modificationTime: record.modificationTime, datePrecision: record.datePrecision, etag: record.etag)
        }

        private mutating func appendText(_ text: String) {
            appendNumber(UInt64(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
        }

        private mutating func appendNumber(_ value: UInt64) {
            var rest = value
            while rest >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
                rest >>= 7
            }
            bytes.append(UInt8(rest))
        }
    }

    /// The listing of `parts`' records, in order: magic, records, trailer. Each part's bytes are let go as they
    /// are copied, so that a million records are never held three times.
    package static func joined(_ parts: inout [Writer]) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(magic.count + parts.reduce(0) { $0 + $1.bytes.count } + trailerLength)
        body += magic
        var count = 0
        for index in parts.indices {
            body += parts[index].bytes
            count += parts[index].count
            parts[index] = Writer()
        }
        appendTrailer(to: &body, count: count)
        return body
    }

    /// A whole listing of `records`.
    static func encode(_ records: [Record]) -> [UInt8] {
        var writer = Writer()
        for record in records { writer.append(record) }
        var parts = [writer]
        return joined(&parts)
    }

    private static func appendTrailer(to body: inout [UInt8], count: Int) {
        append(UInt32(truncatingIfNeeded: count), to: &body)
        append(checksum(body, upTo: body.count), to: &body)
    }

    private static func append(_ value: UInt32, to body: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { body.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << UInt32(8 * $1) }
    }

    private static func checksum(_ bytes: [UInt8], upTo end: Int) -> UInt32 {
        // SAFETY: the buffer is the array's own storage, read only inside the closure, up to `end` <= its count.
        bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[..<end])) }
    }

    /// Whether `bytes` starts as records do (whole or not).
    static func isRecords(_ bytes: [UInt8]) -> Bool {
        bytes.starts(with: magic)
    }

    /// How many records `bytes` says it holds (its trailer, unchecked): a capacity to reserve, nothing more.
    static func statedCount(_ bytes: [UInt8]) -> Int {
        guard bytes.count >= magic.count + trailerLength else { return 0 }
        return Int(uint32(bytes, at: bytes.count - trailerLength))
    }

    /// Hands each record of `bytes` to `visit`, in order, after checking the whole: nil when `bytes` are not a
    /// listing of records, are of another version, or are cut or damaged (then `visit` saw nothing).
    static func forEach(_ bytes: [UInt8], _ visit: (Record) -> Void) -> Bool {
        forEachFields(bytes) { fields in
            visit(fields.record(in: bytes))
            return true
        }
    }

    /// One record's fields where they lie in the listing's bytes, no text made: what a first listing added whole
    /// reads (PlainListing.swift), a million names checked before any of them is made a string.
    struct Fields {
        var isDirectory: Bool
        var secondPrecision: Bool
        /// Where its name's UTF-8 bytes are.
        var name: Range<Int>
        var size: UInt64?
        var modificationTime: Int64?
        /// Where its ETag's bytes are, if it has one.
        var etag: Range<Int>?

        /// The record these fields are in `bytes`.
        func record(in bytes: [UInt8]) -> Record {
            // Bytes the CRC vouches for, from strings the writer had: UTF-8 (a wrong byte would show as U+FFFD).
            var record = Record(name: String(decoding: bytes[name], as: UTF8.self), isDirectory: isDirectory)
            record.datePrecision = secondPrecision ? .second : .minute
            record.size = size
            record.modificationTime = modificationTime
            record.etag = etag.map { String(decoding: bytes[$0], as: UTF8.self) }
            return record
        }
    }

    /// `forEach` as fields (`Fields`) until `visit` returns false: the same checks of the whole first, unless
    /// `checked` says a call before made them on the same bytes (and returned true).
    static func forEachFields(_ bytes: [UInt8], checked: Bool = false, _ visit: (Fields) -> Bool) -> Bool {
        guard bytes.count >= magic.count + trailerLength, isRecords(bytes) else { return false }
        let end = bytes.count - trailerLength
        var reader = Reader(bytes: bytes, index: magic.count, end: end)
        if !checked {
            let count = uint32(bytes, at: end)
            guard checksum(bytes, upTo: end + 4) == uint32(bytes, at: end + 4) else { return false }
            // Checked whole before anything is handed on: a listing is never applied in part. The first pass builds
            // no strings: the CRC vouches for the bytes, and the writer wrote Swift strings, so only the layout is
            // checked.
            var seen = 0
            while reader.index < end {
                guard reader.fields() != nil else { return false }
                seen += 1
            }
            guard seen == Int(count) else { return false }
        }
        reader.index = magic.count
        while reader.index < end, let fields = reader.fields(), visit(fields) {}
        return true
    }

    private struct Reader {
        let bytes: [UInt8]
        var index: Int
        let end: Int

        /// The next record's fields, its layout checked; nil if it is not one.
        mutating func fields() -> Fields? {
            guard index < end else { return nil }
            let flags = bytes[index]
            index += 1
            guard flags & ~Flag.known == 0, let name = text() else { return nil }
            var fields = Fields(isDirectory: flags & Flag.directory != 0,
                                secondPrecision: flags & Flag.secondPrecision != 0, name: name)
            if flags & Flag.size != 0 {
                guard let size = number(), size < 1 << 63 else { return nil }
                fields.size = size
            }
            if flags & Flag.date != 0 {
                guard let zigzag = number() else { return nil }
                fields.modificationTime = Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)
            }
            if flags & Flag.etag != 0 {
                guard let etag = text() else { return nil }
                fields.etag = etag
            }
            return fields
        }

        mutating func number() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < end, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }

        /// Where the next text's bytes are.
        mutating func text() -> Range<Int>? {
            guard let length = number(), length <= UInt64(end - index) else { return nil }
            let start = index
            index += Int(length)
            return start..<index
        }
    }
}
