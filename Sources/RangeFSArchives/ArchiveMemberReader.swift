// Reading one member's bytes by offset. A stored member is one range of the archive. A deflated zip member is
// inflated from its start (deflate has no other entry point without checkpoints), and a .tar.gz member from the
// nearest seek point at or before the offset; the stream is kept between reads, so reading a member in order
// inflates it once. A zip member read whole is checked against its CRC-32 and its size at its end: a member that
// inflates to more or fewer bytes than the directory says, or to other bytes, is a fault, not short data.
import RangeFSSystem

/// Reads the bytes of one member of an indexed archive.
package final class ArchiveMemberReader {
    private let source: any ArchiveSource
    private let archive: String
    private let member: ArchiveMember
    private let seekPoints: [GzipSeekPoint]
    private let limits: ArchiveLimits
    /// A zip member's data start, once its local header is read.
    private var dataStart: Int64?
    private var stream: InflatedStream?
    /// A zip member's CRC-32 over what its stream gave so far (the stream always starts at its beginning).
    private var crc: UInt32 = 0
    /// A stored zip member read in order from its start: where the next read must start to go on with `crc`.
    private var storedChecked: Int64? = 0

    /// A reader of `member`; a .tar.gz's member needs the index's `seekPoints`.
    package init(source: any ArchiveSource, archive: String, member: ArchiveMember, seekPoints: [GzipSeekPoint] = [],
                 limits: ArchiveLimits = ArchiveLimits()) {
        self.source = source
        self.archive = archive
        self.member = member
        self.seekPoints = seekPoints
        self.limits = limits
    }

    /// Up to `count` bytes from `offset` of the member (fewer at its end).
    package func read(offset: Int64, count: Int) throws -> [UInt8] {
        guard offset >= 0, count >= 0, offset < member.size else { return [] }
        let end = member.size - offset > Int64(count) ? offset + Int64(count) : member.size
        switch member.data {
        case .none:
            return []
        case .stored(let start, let length):
            guard length == member.size else { throw fault("its stored length is not its size") }
            return try source.readExactly(offset: start + offset, count: Int(end - offset), archive: archive,
                                          what: "member '\(member.pathString)'")
        case .zip(let localHeader, let compressed, let deflated, _):
            let start = try zipDataStart(localHeader: localHeader, compressed: compressed)
            guard deflated else {
                let bytes = try source.readExactly(offset: start + offset, count: Int(end - offset), archive: archive,
                                                   what: "member '\(member.pathString)'")
                try checkStored(bytes, at: offset)
                return bytes
            }
            if stream == nil || stream!.position > offset {
                stream = try InflatedStream(source: source, archive: archive, kind: .deflate(end: start + compressed),
                                            start: start, limits: limits)
                crc = 0
            }
            return try inflated(from: offset, to: end, base: 0)
        case .gzip(let base):
            let target = base + offset
            if stream == nil || stream!.position > target {
                stream = try nearestStream(to: target)
            }
            return try inflated(from: offset, to: end, base: base)
        }
    }

    /// Bytes `offset..<end` of the member from the open stream, whose position counts from `base`.
    private func inflated(from offset: Int64, to end: Int64, base: Int64) throws -> [UInt8] {
        guard let stream else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(end - offset))
        while stream.position < base + end {
            let before = stream.position
            let chunk = try stream.read(limit: Int(min(256 << 10, base + end - before))).bytes
            if chunk.isEmpty { throw fault("it inflates to \(before - base) bytes, fewer than its \(member.size)") }
            if case .zip = member.data { crc = Inflater.crc32(chunk[...], initial: crc) }
            let skip = Int(max(0, min(Int64(chunk.count), base + offset - before)))
            bytes.append(contentsOf: chunk[skip...])
        }
        if case .zip(_, _, _, let expected) = member.data, stream.position == member.size {
            // The whole member: its stream must end here, and its CRC-32 match.
            let more = try stream.read(limit: 1).bytes
            guard more.isEmpty, stream.finished else { throw fault("it inflates to more than its \(member.size) bytes") }
            guard crc == expected else { throw fault("its CRC-32 does not match") }
        }
        return bytes
    }

    /// Checks a stored zip member's CRC-32 once it has been read in order to its end (a read elsewhere stops that).
    private func checkStored(_ bytes: [UInt8], at offset: Int64) throws {
        guard case .zip(_, _, _, let expected) = member.data, storedChecked == offset else {
            storedChecked = nil
            return
        }
        crc = Inflater.crc32(bytes[...], initial: crc)
        storedChecked = offset + Int64(bytes.count)
        if storedChecked == member.size && crc != expected { throw fault("its CRC-32 does not match") }
    }

    /// A .tar.gz's stream opened at the last seek point at or before `target` (the start when there is none).
    private func nearestStream(to target: Int64) throws -> InflatedStream {
        var low = 0, high = seekPoints.count
        while low < high {
            let middle = (low + high) / 2
            if seekPoints[middle].inflatedOffset <= target { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else {
            return try InflatedStream(source: source, archive: archive, kind: .gzip, start: 0, limits: limits)
        }
        return try InflatedStream(source: source, archive: archive, resumingAt: seekPoints[low - 1], limits: limits)
    }

    /// Where a zip member's data starts: after its local header, read once.
    private func zipDataStart(localHeader: Int64, compressed: Int64) throws -> Int64 {
        if let dataStart { return dataStart }
        let header = try source.readExactly(offset: localHeader, count: 30, archive: archive,
                                            what: "member '\(member.pathString)''s local header")
        guard header.hasSignature(0x0403_4B50, at: 0) else { throw fault("no local header at \(localHeader)") }
        let start = localHeader + 30 + Int64(header.littleEndian16(at: 26)) + Int64(header.littleEndian16(at: 28))
        guard compressed <= source.size - start else {
            throw ArchiveError(archive: archive, fault: .truncated("member '\(member.pathString)'"))
        }
        dataStart = start
        return start
    }

    private func fault(_ reason: String) -> ArchiveError {
        ArchiveError(archive: archive, fault: .badMemberData(member: member.pathString, reason: reason))
    }
}
