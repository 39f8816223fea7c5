// An index's saved form, for the cache to keep beside the archive's blocks (keyed by the archive URL's version):
// a remount lists an archive at once and offline. Little-endian fixed-width fields through ByteWriter and
// ByteReader, never raw structs, and a CRC32C over everything before it, as the cache's own records are
// (DESIGN.md §3). A saved index that fails any check is not used: the archive is indexed again.
//
//   magic "RFSARIX1" | version u32 | format u32 | member count u32
//   per member: path (u32 length + UTF-8, components joined by '/') | kind u32 | size u64 | mtime u64 | mode u32 |
//               link target (symlinks only) | data tag u32 (0 none, 1 stored, 2 zip, 3 gzip) and its u64 fields
//               (zip: local header, compressed, then flags u32 (1: deflated), crc32 u32)
//   seek point count u32 | per point: inflated u64 | compressed u64 | bits u32 | window (u32 length + bytes)
//   refused count u32 | refusals kept u32 | per refusal: name, reason
//   CRC32C u32 of all the above
import RangeFSSystem

extension ArchiveIndex {
    private static let magic = Array("RFSARIX1".utf8)
    private static let version: UInt32 = 1

    /// The saved form.
    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(raw: Self.magic)
        writer.write(Self.version)
        writer.write(UInt32(format.rawValue))
        writer.write(UInt32(members.count))
        for member in members {
            writer.write(string: member.path.joined(separator: "/"))
            writer.write(UInt32(member.kind.rawValue))
            writer.write(UInt64(member.size))
            writer.write(UInt64(bitPattern: member.modificationTime))
            writer.write(member.mode)
            if member.kind == .symlink { writer.write(string: member.linkTarget ?? "") }
            switch member.data {
            case .none:
                writer.write(UInt32(0))
            case .stored(let offset, let length):
                writer.write(UInt32(1))
                writer.write(UInt64(offset))
                writer.write(UInt64(length))
            case .zip(let localHeader, let compressed, let deflated, let crc32):
                writer.write(UInt32(2))
                writer.write(UInt64(localHeader))
                writer.write(UInt64(compressed))
                writer.write(UInt32(deflated ? 1 : 0))
                writer.write(crc32)
            case .gzip(let offset):
                writer.write(UInt32(3))
                writer.write(UInt64(offset))
            }
        }
        writer.write(UInt32(seekPoints.count))
        for point in seekPoints {
            writer.write(UInt64(point.inflatedOffset))
            writer.write(UInt64(point.compressedOffset))
            writer.write(UInt32(point.bits))
            writer.write(UInt32(point.window.count))
            writer.write(raw: point.window)
        }
        writer.write(UInt32(refusedCount))
        writer.write(UInt32(refused.count))
        for refusal in refused {
            writer.write(string: refusal.name)
            writer.write(string: refusal.reason)
        }
        writer.write(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    /// Reads a saved index back; any damage is an error (a `FormatError`) and the caller indexes the archive again.
    package init(decoding bytes: [UInt8]) throws {
        self = try Self.decode(bytes)
    }

    private static func decode(_ bytes: [UInt8]) throws(FormatError) -> ArchiveIndex {
        guard bytes.count >= Self.magic.count + 4 else { throw .truncated }
        guard bytes.starts(with: Self.magic) else { throw .badMagic }
        var trailer = ByteReader(Array(bytes.suffix(4)))
        guard try trailer.readUInt32() == CRC32C.checksum(bytes.dropLast(4)) else { throw .checksumMismatch }
        var reader = ByteReader(Array(bytes.dropLast(4)))
        _ = try reader.readBytes(Self.magic.count)
        let version = try reader.readUInt32()
        guard version == Self.version else { throw .unsupportedVersion(version) }
        guard let format = Format(rawValue: UInt8(clamping: try reader.readUInt32())) else {
            throw .inconsistent("an unknown archive format")
        }
        let memberCount = Int(try reader.readUInt32())
        guard memberCount <= reader.remaining / 32 else { throw .inconsistent("more members than bytes") }
        var members: [ArchiveMember] = []
        members.reserveCapacity(memberCount)
        for _ in 0..<memberCount {
            members.append(try decodeMember(&reader))
        }
        let pointCount = Int(try reader.readUInt32())
        guard pointCount <= reader.remaining / 24 else { throw .inconsistent("more seek points than bytes") }
        var points: [GzipSeekPoint] = []
        for _ in 0..<pointCount {
            let inflated = Int64(bitPattern: try reader.readUInt64())
            let compressed = Int64(bitPattern: try reader.readUInt64())
            let bits = try reader.readUInt32()
            let window = Array(try reader.readBytes(Int(try reader.readUInt32())))
            guard bits < 8, window.count <= InflatedStream.windowLength, inflated >= 0, compressed >= 0 else {
                throw .inconsistent("a seek point out of range")
            }
            points.append(GzipSeekPoint(inflatedOffset: inflated, compressedOffset: compressed, bits: UInt8(bits),
                                        window: window))
        }
        let refusedCount = Int(try reader.readUInt32())
        let keptCount = Int(try reader.readUInt32())
        guard keptCount <= ArchiveIndexBuilder.refusalsKept else { throw .inconsistent("too many refusals kept") }
        var refused: [RefusedMember] = []
        for _ in 0..<keptCount {
            refused.append(RefusedMember(name: try reader.readString(), reason: try reader.readString()))
        }
        guard reader.remaining == 0 else { throw .inconsistent("bytes after the index") }
        return ArchiveIndex(format: format, members: members, seekPoints: points, refused: refused,
                            refusedCount: refusedCount)
    }

    private static func decodeMember(_ reader: inout ByteReader) throws(FormatError) -> ArchiveMember {
        let path = try reader.readString(limit: 1 << 16)
        guard case .components(let components) = MemberPath.components(of: path, maximumDepth: .max),
              components.joined(separator: "/") == path else {
            throw .inconsistent("a member path that is not one")
        }
        guard let kind = ArchiveMemberKind(rawValue: UInt8(clamping: try reader.readUInt32())) else {
            throw .inconsistent("an unknown member kind")
        }
        let size = Int64(bitPattern: try reader.readUInt64())
        let modificationTime = Int64(bitPattern: try reader.readUInt64())
        let mode = try reader.readUInt32()
        let linkTarget = kind == .symlink ? try reader.readString(limit: 1 << 16) : nil
        let data: ArchiveMemberData
        switch try reader.readUInt32() {
        case 0: data = .none
        case 1: data = .stored(offset: Int64(bitPattern: try reader.readUInt64()),
                               length: Int64(bitPattern: try reader.readUInt64()))
        case 2: data = .zip(localHeader: Int64(bitPattern: try reader.readUInt64()),
                            compressed: Int64(bitPattern: try reader.readUInt64()),
                            deflated: try reader.readUInt32() == 1, crc32: try reader.readUInt32())
        case 3: data = .gzip(offset: Int64(bitPattern: try reader.readUInt64()))
        default: throw .inconsistent("an unknown member data kind")
        }
        guard size >= 0, mode <= 0o7777 else { throw .inconsistent("a member's size or mode out of range") }
        return ArchiveMember(path: components, kind: kind, size: size, modificationTime: modificationTime, mode: mode,
                             linkTarget: linkTarget, data: data)
    }
}
