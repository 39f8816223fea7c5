// A .tar.gz's index: one sequential inflate of the whole stream (deflate cannot be entered elsewhere until a pass
// has been made), reading the tar's headers as they pass and recording a seek point every `seekSpacing` inflated
// bytes (zlib's zran.c: a deflate block boundary, its bit offset and the 32 KiB window before it). A member's read
// later starts at the nearest point before it instead of at byte 0.
//
// Each point holds a 32 KiB window, so the points are bounded too: past a quarter of the index's memory bound, every
// other point is dropped and the spacing doubled (a 10 GB archive keeps points every 16 MiB or so, not 4). The whole
// stream is inflated to its end, so a corrupt or truncated stream, a bad gzip CRC, or garbage after it is found
// now and named, not when a member is read.

/// Reads a gzip-compressed tar into an `ArchiveIndex` with seek points.
package struct TarGzipIndexReader {
    let source: any ArchiveSource
    let archive: String
    let limits: ArchiveLimits
    /// Inflated bytes between seek points.
    var seekSpacing: Int64 = 4 << 20

    package init(source: any ArchiveSource, archive: String, limits: ArchiveLimits, seekSpacing: Int64 = 4 << 20) {
        self.source = source
        self.archive = archive
        self.limits = limits
        self.seekSpacing = seekSpacing
    }

    /// The archive's index.
    package func index() throws -> ArchiveIndex {
        let stream = try SeekPointRecorder(source: source, archive: archive, limits: limits, spacing: seekSpacing)
        var builder = ArchiveIndexBuilder(archive: archive, limits: limits)
        let walker = TarHeaderWalker(archive: archive, limits: limits, read: { offset, count in
            try stream.read(at: offset, count: count)
        }, data: { offset, _ in .gzip(offset: offset) })
        _ = try walker.walk(into: &builder)
        let end = try stream.drain()
        let index = builder.finish(format: .tarGzip, seekPoints: stream.points)
        for member in index.members {
            guard case .gzip(let offset) = member.data, member.size > end - offset else { continue }
            throw ArchiveError(archive: archive, fault: .truncated("member '\(member.pathString)'"))
        }
        return index
    }
}

/// The gzip stream inflated forward from its start, with seek points taken as it goes.
private final class SeekPointRecorder {
    private let stream: InflatedStream
    private let maximumPoints: Int
    private var spacing: Int64
    private var window: [UInt8] = []
    private var lastPoint: Int64 = 0
    private(set) var points: [GzipSeekPoint] = []

    init(source: any ArchiveSource, archive: String, limits: ArchiveLimits, spacing: Int64) throws {
        stream = try InflatedStream(source: source, archive: archive, kind: .gzip, start: 0, limits: limits)
        self.spacing = max(spacing, Int64(InflatedStream.windowLength))
        maximumPoints = max(2, limits.maximumIndexBytes / 4 / InflatedStream.windowLength)
    }

    /// `count` inflated bytes at `offset` (fewer at the stream's end); `offset` is never before an earlier read's.
    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        while stream.position < offset {
            if try next(limit: Int(min(offset - stream.position, 64 << 10))).isEmpty && stream.finished { return [] }
        }
        var bytes: [UInt8] = []
        while bytes.count < count && !stream.finished {
            bytes += try next(limit: count - bytes.count)
        }
        return bytes
    }

    /// Inflates what is left (a tar's padding, usually) to the stream's end, which it checks; returns its length.
    func drain() throws -> Int64 {
        while !stream.finished { _ = try next(limit: 64 << 10) }
        return stream.position
    }

    private func next(limit: Int) throws -> [UInt8] {
        let output = try stream.read(limit: min(limit, 64 << 10), stopAtBlocks: true)
        window += output.bytes
        if window.count > 2 * InflatedStream.windowLength {
            window.removeFirst(window.count - InflatedStream.windowLength)
        }
        if let bits = output.boundaryBits, stream.position - lastPoint >= spacing {
            points.append(GzipSeekPoint(inflatedOffset: stream.position, compressedOffset: stream.compressedPosition,
                                        bits: bits, window: Array(window.suffix(InflatedStream.windowLength))))
            lastPoint = stream.position
            if points.count > maximumPoints {
                points = points.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
                spacing *= 2
            }
        }
        return output.bytes
    }
}
