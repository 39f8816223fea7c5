// One pass over a tar's 512-byte headers, shared by the plain tar reader (headers read by range, bodies skipped by
// offset) and the .tar.gz reader (the same offsets in the inflated stream). Reads ustar, GNU's long names and link
// targets ('L', 'K') and base-256 sizes, and pax headers ('x': path, linkpath, size, mtime); a global pax header
// ('g') is skipped. Devices, fifos and GNU sparse files are left out with a reason. A hard link ('1') becomes a
// file with its target's data, when the target came before it (as tar writes them).
//
// Hostile input: every header's checksum is checked; a long name or pax header is read whole only up to
// ArchiveLimits.maximumHeaderBytes; a size or date that is not a number is a fault naming the header's offset.

/// Reads tar headers through `read` (bytes at an offset of the tar, fewer only at its end) into an index builder.
struct TarHeaderWalker {
    let archive: String
    let limits: ArchiveLimits
    /// The tar's bytes: the archive itself, or a gzip stream inflated forward (offsets only grow).
    let read: (Int64, Int) throws -> [UInt8]
    /// Where a member's body at `offset` of the tar is, as the index keeps it.
    let data: (_ offset: Int64, _ size: Int64) -> ArchiveMemberData

    /// Adds every member to `builder`; returns the offset just past the last header read.
    func walk(into builder: inout ArchiveIndexBuilder) throws -> Int64 {
        var offset: Int64 = 0
        var longName: String?
        var longLink: String?
        var pax: [String: String] = [:]
        var files: [String: (size: Int64, data: ArchiveMemberData)] = [:]
        // A long name's or pax header's body is read with the header after it, in one read (GNU tar's pax format
        // puts one before every member).
        var nextHeader: (offset: Int64, bytes: [UInt8])?
        while true {
            let header = nextHeader?.offset == offset ? nextHeader!.bytes : try read(offset, 512)
            nextHeader = nil
            if header.isEmpty { return offset }  // the end without the two zero blocks: tar itself accepts it
            guard header.count == 512 else { throw fault(.truncated("the header at \(offset)")) }
            if header.allSatisfy({ $0 == 0 }) { return offset + 512 }
            try checkSum(header, at: offset)
            let type = header[156]
            var size = try number(header, 124, 12, "size", at: offset)
            if let text = pax["size"] {
                guard let value = Int64(text), value >= 0 else { throw fault(.malformed("pax size '\(text)'")) }
                size = value
            }
            let body = offset + 512
            let (next, overflow) = body.addingReportingOverflow(size > Int64.max - 511 ? size : (size + 511) / 512 * 512)
            guard !overflow, size <= Int64.max - 511 else { throw fault(.malformed("a size of \(size) at \(offset)")) }
            switch type {
            case UInt8(ascii: "L"), UInt8(ascii: "K"):
                let text = try headerBody(at: body, size: size, next: next, nextHeader: &nextHeader)
                let value = String(decoding: text.prefix { $0 != 0 }, as: UTF8.self)
                if type == UInt8(ascii: "L") { longName = value } else { longLink = value }
            case UInt8(ascii: "x"):
                let records = try headerBody(at: body, size: size, next: next, nextHeader: &nextHeader)
                pax.merge(try paxRecords(records, at: offset)) { $1 }
            case UInt8(ascii: "g"):
                break
            default:
                let name = pax["path"] ?? longName ?? storedName(header)
                let link = pax["linkpath"] ?? longLink ?? cString(header, 157, 100)
                var modificationTime = try number(header, 136, 12, "mtime", at: offset)
                if let text = pax["mtime"] {
                    guard let value = Int64(text.prefix { $0 != "." }) else {
                        throw fault(.malformed("pax mtime '\(text)'"))
                    }
                    modificationTime = value
                }
                let mode = UInt32(clamping: try number(header, 100, 8, "mode", at: offset))
                try add(type: type, name: name, link: link, size: size, time: modificationTime, mode: mode,
                        body: body, files: &files, to: &builder)
                longName = nil
                longLink = nil
                pax = [:]
            }
            offset = next
        }
    }

    private func add(type: UInt8, name: String, link: String, size: Int64, time: Int64, mode: UInt32, body: Int64,
                     files: inout [String: (size: Int64, data: ArchiveMemberData)],
                     to builder: inout ArchiveIndexBuilder) throws {
        switch type {
        case 0, UInt8(ascii: "0"), UInt8(ascii: "7"):
            let data = size > 0 ? data(body, size) : .none
            files[name] = (size, data)
            try builder.add(name: name, kind: name.hasSuffix("/") ? .directory : .file, size: size,
                            modificationTime: time, mode: mode, data: data)
        case UInt8(ascii: "1"):
            guard let target = files[link] else { return builder.refuse(name, "a hard link to '\(link)', not before it") }
            files[name] = target
            try builder.add(name: name, kind: .file, size: target.size, modificationTime: time, mode: mode,
                            data: target.data)
        case UInt8(ascii: "2"):
            try builder.add(name: name, kind: .symlink, size: 0, modificationTime: time, mode: mode,
                            linkTarget: link, data: .none)
        case UInt8(ascii: "5"):
            try builder.add(name: name, kind: .directory, size: 0, modificationTime: time, mode: mode, data: .none)
        default:
            builder.refuse(name, "a tar member of type '\(String(decoding: [type], as: UTF8.self))' (not a file, "
                           + "folder or link)")
        }
    }

    /// The header's name, with ustar's prefix (POSIX's magic "ustar\0" only: GNU keeps dates there).
    private func storedName(_ header: [UInt8]) -> String {
        let name = cString(header, 0, 100)
        guard header[257..<263].elementsEqual("ustar\0".utf8) else { return name }
        let prefix = cString(header, 345, 155)
        return prefix.isEmpty ? name : prefix + "/" + name
    }

    /// A long name's or pax header's body, bounded; a short one is read with the header at `next`, kept in
    /// `nextHeader`.
    private func headerBody(at offset: Int64, size: Int64, next: Int64,
                            nextHeader: inout (offset: Int64, bytes: [UInt8])?) throws -> [UInt8] {
        guard size <= Int64(limits.maximumHeaderBytes) else {
            throw fault(.malformed("a \(size)-byte extended header at \(offset - 512)"))
        }
        let together = next - offset <= 4096
        let bytes = try read(offset, Int(together ? next - offset + 512 : size))
        guard bytes.count >= Int(size) else { throw fault(.truncated("the extended header at \(offset - 512)")) }
        if together && bytes.count > Int(next - offset) { nextHeader = (next, Array(bytes[Int(next - offset)...])) }
        return Array(bytes.prefix(Int(size)))
    }

    /// pax records: "LENGTH KEY=VALUE\n", LENGTH counting the whole record.
    private func paxRecords(_ bytes: [UInt8], at offset: Int64) throws -> [String: String] {
        var records: [String: String] = [:]
        var position = 0
        while position < bytes.count {
            guard let space = bytes[position...].firstIndex(of: UInt8(ascii: " ")),
                  let length = Int(String(decoding: bytes[position..<space], as: UTF8.self)), length > 0,
                  position + length <= bytes.count, bytes[position + length - 1] == UInt8(ascii: "\n"),
                  let equals = bytes[(space + 1)..<(position + length)].firstIndex(of: UInt8(ascii: "=")) else {
                throw fault(.malformed("a pax header at \(offset)"))
            }
            let key = String(decoding: bytes[(space + 1)..<equals], as: UTF8.self)
            records[key] = String(decoding: bytes[(equals + 1)..<(position + length - 1)], as: UTF8.self)
            position += length
        }
        return records
    }

    private func checkSum(_ header: [UInt8], at offset: Int64) throws {
        let stored = try number(header, 148, 8, "checksum", at: offset)
        var sum: Int64 = 0
        for (index, byte) in header.enumerated() { sum += (148..<156).contains(index) ? 32 : Int64(byte) }
        guard sum == stored else { throw fault(.malformed("the header at \(offset) fails its checksum")) }
    }

    /// An octal field (NUL or space ended), or GNU's base-256 (the first byte's high bit set).
    private func number(_ header: [UInt8], _ start: Int, _ length: Int, _ field: String,
                        at offset: Int64) throws -> Int64 {
        let bytes = header[start..<(start + length)]
        if let first = bytes.first, first & 0x80 != 0 {
            guard first == 0x80, bytes.dropFirst().prefix(while: { $0 == 0 }).count >= length - 8 else {
                throw fault(.malformed("the \(field) at \(offset) is out of range"))
            }
            return bytes.dropFirst().reduce(0) { $0 << 8 | Int64($1) }
        }
        var value: Int64 = 0
        var digits = 0
        for byte in bytes {
            if byte == 0 || byte == UInt8(ascii: " ") {
                if digits > 0 { break } else { continue }
            }
            guard (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(byte), value < Int64.max >> 3 else {
                throw fault(.malformed("the \(field) at \(offset) is not a number"))
            }
            value = value << 3 | Int64(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return value
    }

    private func cString(_ header: [UInt8], _ start: Int, _ length: Int) -> String {
        String(decoding: header[start..<(start + length)].prefix { $0 != 0 }, as: UTF8.self)
    }

    private func fault(_ fault: ArchiveFault) -> ArchiveError {
        ArchiveError(archive: archive, fault: fault)
    }
}
