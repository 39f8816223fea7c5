// A zip's index, read from its end by range: one read of the tail (the end-of-central-directory record sits in the
// last 22 bytes plus a comment of at most 65,535, with zip64's locator just before it), then the central directory
// in one read (or none, when the tail held it), and zip64's end record in one more when the tail did not hold it.
// Local headers are not read here: a member's reader reads its one local header to find where the data starts.
//
// What a hostile zip tries, and what stops it: a count or a directory size beyond the archive or the bounds (checked
// before anything is allocated); members sharing bytes (a zip bomb that overlaps its members, David Fifield's 2019
// construction) or lying over the central directory (the spans of the local headers and data, sorted, must not
// meet); a size deflate cannot give from its compressed size (ArchiveLimits.maximumInflationRatio); a name that
// leaves the folder (MemberPath). Encrypted members and methods other than stored and deflate are left out.

/// Reads a zip's or zip64's central directory into an `ArchiveIndex`.
package struct ZipIndexReader {
    private static let endRecordSignature: UInt32 = 0x0605_4B50
    private static let zip64LocatorSignature: UInt32 = 0x0706_4B50
    private static let zip64EndRecordSignature: UInt32 = 0x0606_4B50
    private static let centralHeaderSignature: UInt32 = 0x0201_4B50
    /// The end record (22 bytes), its longest comment and zip64's locator (20) before it.
    private static let tailLength = 22 + 65_535 + 20
    /// A symlink's target is read at indexing (the member's data); longer ones are left out.
    static let maximumLinkLength = 4096

    let source: any ArchiveSource
    let archive: String
    let limits: ArchiveLimits

    package init(source: any ArchiveSource, archive: String, limits: ArchiveLimits) {
        self.source = source
        self.archive = archive
        self.limits = limits
    }

    /// Where the central directory is and how many records it holds.
    private struct Directory {
        var offset: Int64
        var size: Int64
        var count: Int64
    }

    /// One central directory record's fields.
    private struct Record {
        var name: String
        var kind: ArchiveMemberKind
        var size: Int64
        var compressed: Int64
        var localHeader: Int64
        var span: Int64
        var method: UInt16
        var flags: UInt16
        var crc32: UInt32
        var modificationTime: Int64
        var mode: UInt32
    }

    /// The archive's index.
    package func index() throws -> ArchiveIndex {
        let tailStart = max(0, source.size - Int64(Self.tailLength))
        let tail = try source.readExactly(offset: tailStart, count: Int(source.size - tailStart), archive: archive,
                                          what: "its last bytes")
        let (directory, directoryEnd) = try locateDirectory(tail: tail, tailStart: tailStart)
        let bytes: [UInt8]
        if directory.offset >= tailStart {
            let start = Int(directory.offset - tailStart)
            bytes = Array(tail[start..<(start + Int(directory.size))])
        } else {
            bytes = try source.readExactly(offset: directory.offset, count: Int(directory.size), archive: archive,
                                           what: "the central directory")
        }
        var records: [Record] = []
        var position = 0
        for _ in 0..<directory.count {
            records.append(try record(in: bytes, at: &position))
        }
        try checkSpans(records, directoryStart: directory.offset, directoryEnd: directoryEnd)
        var builder = ArchiveIndexBuilder(archive: archive, limits: limits)
        for record in records {
            try add(record, to: &builder)
        }
        return builder.finish(format: .zip)
    }

    /// The central directory's place, from the end record (and zip64's), and where the directory must end.
    private func locateDirectory(tail: [UInt8], tailStart: Int64) throws -> (Directory, Int64) {
        var endRecord = -1
        var candidate = tail.count - 22
        while candidate >= 0 {
            // The last record whose comment reaches the end exactly; a comment may hold the signature itself.
            if tail.hasSignature(Self.endRecordSignature, at: candidate)
                && candidate + 22 + Int(tail.littleEndian16(at: candidate + 20)) == tail.count {
                endRecord = candidate
                break
            }
            candidate -= 1
        }
        guard endRecord >= 0 else { throw fault(.malformed("no end of central directory record (not a zip)")) }
        var directory = Directory(offset: Int64(tail.littleEndian32(at: endRecord + 16)),
                                  size: Int64(tail.littleEndian32(at: endRecord + 12)),
                                  count: Int64(tail.littleEndian16(at: endRecord + 10)))
        var directoryEnd = tailStart + Int64(endRecord)
        let locator = endRecord - 20
        if tail.hasSignature(Self.zip64LocatorSignature, at: locator) {
            let recordOffset = Int64(clamping: tail.littleEndian64(at: locator + 8))
            guard recordOffset >= 0, recordOffset <= directoryEnd - 56 - 20 else {
                throw fault(.malformed("zip64's end record at \(recordOffset) is outside the archive"))
            }
            let record = recordOffset >= tailStart
                ? Array(tail[Int(recordOffset - tailStart)..<(Int(recordOffset - tailStart) + 56)])
                : try source.readExactly(offset: recordOffset, count: 56, archive: archive,
                                         what: "zip64's end record")
            guard record.hasSignature(Self.zip64EndRecordSignature, at: 0) else {
                throw fault(.malformed("no zip64 end record at \(recordOffset)"))
            }
            directory = Directory(offset: Int64(clamping: record.littleEndian64(at: 48)),
                                  size: Int64(clamping: record.littleEndian64(at: 40)),
                                  count: Int64(clamping: record.littleEndian64(at: 32)))
            directoryEnd = recordOffset
        }
        guard directory.offset >= 0, directory.size >= 0, directory.offset <= directoryEnd,
              directory.size <= directoryEnd - directory.offset else {
            throw fault(.malformed("the central directory (\(directory.size) bytes at \(directory.offset)) is "
                                   + "outside the archive"))
        }
        guard directory.count <= Int64(limits.maximumMembers) else {
            throw fault(.tooManyMembers(limit: limits.maximumMembers))
        }
        guard directory.size <= Int64(limits.maximumIndexBytes) else {
            throw fault(.indexTooLarge(limit: limits.maximumIndexBytes))
        }
        guard directory.count * 46 <= directory.size else {
            throw fault(.malformed("\(directory.count) records cannot be \(directory.size) bytes"))
        }
        return (directory, directoryEnd)
    }

    /// The record at `position` of the directory's bytes; `position` moves past it.
    private func record(in bytes: [UInt8], at position: inout Int) throws -> Record {
        guard position + 46 <= bytes.count, bytes.hasSignature(Self.centralHeaderSignature, at: position) else {
            throw fault(.malformed("no central directory record at byte \(position) of the directory"))
        }
        let start = position
        let nameLength = Int(bytes.littleEndian16(at: start + 28))
        let extraLength = Int(bytes.littleEndian16(at: start + 30))
        let commentLength = Int(bytes.littleEndian16(at: start + 32))
        let end = start + 46 + nameLength + extraLength + commentLength
        guard end <= bytes.count else { throw fault(.truncated("the central directory's record at byte \(start)")) }
        position = end
        let nameBytes = bytes[(start + 46)..<(start + 46 + nameLength)]
        let name = String(decoding: nameBytes, as: UTF8.self)
        var size = Int64(bytes.littleEndian32(at: start + 24))
        var compressed = Int64(bytes.littleEndian32(at: start + 20))
        var localHeader = Int64(bytes.littleEndian32(at: start + 42))
        var modificationTime = dosTime(date: bytes.littleEndian16(at: start + 14),
                                       time: bytes.littleEndian16(at: start + 12)) ?? 0
        // Extra fields: zip64's wide sizes and offset (only those whose narrow field is all ones, in this order),
        // and Info-ZIP's UTC modification time.
        var extra = start + 46 + nameLength
        let extraEnd = extra + extraLength
        while extra + 4 <= extraEnd {
            let tag = bytes.littleEndian16(at: extra), length = Int(bytes.littleEndian16(at: extra + 2))
            let body = extra + 4
            guard body + length <= extraEnd else { break }
            if tag == 0x0001 {
                var field = body
                if size == 0xFFFF_FFFF, field + 8 <= body + length {
                    size = Int64(clamping: bytes.littleEndian64(at: field)); field += 8
                }
                if compressed == 0xFFFF_FFFF, field + 8 <= body + length {
                    compressed = Int64(clamping: bytes.littleEndian64(at: field)); field += 8
                }
                if localHeader == 0xFFFF_FFFF, field + 8 <= body + length {
                    localHeader = Int64(clamping: bytes.littleEndian64(at: field)); field += 8
                }
            } else if tag == 0x5455, length >= 5, bytes[body] & 1 != 0 {
                modificationTime = Int64(Int32(bitPattern: bytes.littleEndian32(at: body + 1)))
            }
            extra = body + length
        }
        let madeBy = bytes.littleEndian16(at: start + 4) >> 8
        let attributes = bytes.littleEndian32(at: start + 38)
        let unixMode = madeBy == 3 ? attributes >> 16 : 0
        let kind: ArchiveMemberKind = switch unixMode & 0o170000 {
        case 0o120000: .symlink
        case 0o040000: .directory
        default: name.hasSuffix("/") || attributes & 0x10 != 0 ? .directory : .file
        }
        let mode = unixMode & 0o7777 != 0 ? unixMode & 0o7777 : ArchiveMember.defaultMode(kind)
        // The local header is at least 30 bytes and the name; a size near 2^63 (zip64's) spans everything.
        let span = compressed > Int64.max - 0x10000 ? Int64.max : 30 + Int64(nameLength) + compressed
        return Record(name: name, kind: kind, size: size, compressed: compressed, localHeader: localHeader,
                      span: span, method: bytes.littleEndian16(at: start + 10),
                      flags: bytes.littleEndian16(at: start + 8), crc32: bytes.littleEndian32(at: start + 16),
                      modificationTime: modificationTime, mode: mode)
    }

    /// Every member's local header and data before the directory, and no two sharing a byte.
    private func checkSpans(_ records: [Record], directoryStart: Int64, directoryEnd: Int64) throws {
        var previousEnd: Int64 = 0
        var previousName = ""
        for record in records.sorted(by: { $0.localHeader < $1.localHeader }) {
            guard record.localHeader >= 0, record.compressed >= 0, record.size >= 0 else {
                throw fault(.malformed("member '\(record.name)' has a negative size or offset"))
            }
            guard record.localHeader >= previousEnd else { throw fault(.overlapping(member: previousName)) }
            let (end, overflow) = record.localHeader.addingReportingOverflow(record.span)
            guard !overflow, end <= directoryStart else { throw fault(.overlapping(member: record.name)) }
            previousEnd = end
            previousName = record.name
        }
    }

    /// Adds `record`'s member, or leaves it out with the reason when this reader cannot read it.
    private func add(_ record: Record, to builder: inout ArchiveIndexBuilder) throws {
        if record.flags & 1 != 0 {
            return builder.refuse(record.name, "it is encrypted")
        }
        guard record.method == 0 || record.method == 8 else {
            return builder.refuse(record.name, "compression method \(record.method) (only stored and deflate)")
        }
        if record.method == 0 && record.kind != .directory && record.compressed != record.size {
            throw fault(.malformed("stored member '\(record.name)' has \(record.compressed) bytes for \(record.size)"))
        }
        if record.method == 8 && !limits.inflationAllowed(size: record.size, compressed: record.compressed) {
            throw fault(.inflationRatio(member: record.name, size: record.size, compressed: record.compressed))
        }
        let data = ArchiveMemberData.zip(localHeader: record.localHeader, compressed: record.compressed,
                                         deflated: record.method == 8, crc32: record.crc32)
        var linkTarget: String?
        if record.kind == .symlink {
            guard record.size <= Int64(Self.maximumLinkLength) else {
                return builder.refuse(record.name, "a symlink target longer than \(Self.maximumLinkLength)")
            }
            let link = ArchiveMember(path: [record.name], kind: .file, size: record.size,
                                     modificationTime: 0, mode: 0, data: data)
            let target = try ArchiveMemberReader(source: source, archive: archive, member: link, limits: limits)
                .read(offset: 0, count: Int(record.size))
            linkTarget = String(decoding: target, as: UTF8.self)
        }
        try builder.add(name: record.name, kind: record.kind, size: record.size,
                        modificationTime: record.modificationTime, mode: record.mode, linkTarget: linkTarget,
                        data: data)
    }

    private func fault(_ fault: ArchiveFault) -> ArchiveError {
        ArchiveError(archive: archive, fault: fault)
    }
}
