// A deflate or gzip stream read forward through an ArchiveSource: the compressed bytes come in chunks by range,
// the inflated bytes go out as asked. Used by a zip member's reader (raw deflate between its data's start and end),
// by the .tar.gz indexer (gzip from the archive's start, stopping at block boundaries to take seek points) and by a
// .tar.gz member's reader (raw deflate resumed at a seek point, then gzip again past the member it was in).
//
// A gzip file may hold several gzip members back to back (pigz, bgzip): each is followed by another or by the end.
// Anything else after one is garbage and a fault. Inflated bytes are bounded by the compressed ones read
// (ArchiveLimits.maximumInflationRatio), so a bomb stops long before memory or time runs out.
import RangeFSSystem

/// Where a .tar.gz's inflate can resume: the state zlib needs at one deflate block boundary (zran.c's point).
package struct GzipSeekPoint: Equatable, Sendable {
    /// Inflated bytes before the point.
    package var inflatedOffset: Int64
    /// The first compressed byte wholly after the point.
    package var compressedOffset: Int64
    /// Bits of the byte before `compressedOffset` that belong after the point (0 to 7).
    package var bits: UInt8
    /// The 32 KiB of inflated bytes before the point (fewer near the start).
    package var window: [UInt8]

    package init(inflatedOffset: Int64, compressedOffset: Int64, bits: UInt8, window: [UInt8]) {
        self.inflatedOffset = inflatedOffset
        self.compressedOffset = compressedOffset
        self.bits = bits
        self.window = window
    }
}

/// A compressed stream in an archive, inflated forward.
/// More than 12 stored properties: zlib's stream and the window of compressed input it reads through, positions all
/// advanced together by `read`.
final class InflatedStream {
    /// What the compressed bytes are.
    enum Kind {
        /// Raw deflate ending at or before `end` (a zip member's data).
        case deflate(end: Int64)
        /// gzip members to the archive's end.
        case gzip
    }

    static let windowLength = 32 << 10
    private static let chunkLength = 64 << 10

    private let source: any ArchiveSource
    private let archive: String
    private let kind: Kind
    private let limits: ArchiveLimits
    private var inflater: Inflater
    /// Whether the inflater reads raw deflate inside a gzip member (after a seek point): its trailer is then ours.
    private var rawInGzip: Bool
    private var input: [UInt8] = []
    private var inputIndex = 0
    /// The archive offset of `input`'s first byte.
    private var inputStart: Int64
    /// Compressed bytes read and inflated bytes produced since this stream started (for the bomb bound).
    private var compressedRead: Int64 = 0
    private var inflatedCount: Int64 = 0

    /// Inflated bytes produced so far, counted from the stream's (or the seek point's) start.
    private(set) var position: Int64
    /// The stream has ended: no more bytes will come.
    private(set) var finished = false

    /// The archive offset of the next compressed byte inflate will take.
    var compressedPosition: Int64 { inputStart + Int64(inputIndex) }

    /// A stream of `kind` whose compressed bytes start at `start`.
    init(source: any ArchiveSource, archive: String, kind: Kind, start: Int64, limits: ArchiveLimits) throws {
        self.source = source
        self.archive = archive
        self.kind = kind
        self.limits = limits
        inputStart = start
        position = 0
        rawInGzip = false
        do {
            switch kind {
            case .deflate: inflater = try Inflater(.rawDeflate)
            case .gzip: inflater = try Inflater(.gzip)
            }
        } catch {
            throw ArchiveError(archive: archive, fault: .malformed(error.message))
        }
    }

    /// A gzip stream resumed at `point`.
    init(source: any ArchiveSource, archive: String, resumingAt point: GzipSeekPoint, limits: ArchiveLimits) throws {
        self.source = source
        self.archive = archive
        kind = .gzip
        self.limits = limits
        position = point.inflatedOffset
        rawInGzip = true
        inputStart = point.compressedOffset
        do {
            inflater = try Inflater(.rawDeflate)
            if point.bits > 0 {
                let before = try source.readExactly(offset: point.compressedOffset - 1, count: 1, archive: archive,
                                                    what: "a seek point's byte")
                try inflater.prime(bits: Int(point.bits), byte: before[0])
            }
            try inflater.setDictionary(point.window)
        } catch let error as Inflater.Failure {
            throw ArchiveError(archive: archive, fault: .malformed("a seek point: \(error.message)"))
        }
    }

    /// What one `read` gave: bytes, and whether it stopped at a block boundary (then with the pending bits).
    struct Output {
        var bytes: [UInt8]
        var boundaryBits: UInt8?
    }

    /// Up to `limit` inflated bytes (none once `finished`). With `stopAtBlocks`, stops early at a block boundary.
    func read(limit: Int, stopAtBlocks: Bool = false) throws -> Output {
        var output: [UInt8] = []
        while !finished && output.count < limit {
            if inputIndex == input.count { try refill() }
            let step: Inflater.Step
            let before = output.count
            do {
                step = try inflater.inflate(input, from: inputIndex, into: &output, limit: limit - output.count,
                                            stopAtBlocks: stopAtBlocks)
            } catch {
                throw ArchiveError(archive: archive, fault: .malformed("inflate at byte \(compressedPosition): "
                                                                       + error.message))
            }
            inputIndex += step.consumed
            if step.streamEnded {
                try endOfStream()
            } else if step.atBlockBoundary {
                try advance(output.count)
                return Output(bytes: output, boundaryBits: UInt8(step.pendingBits))
            } else if step.consumed == 0 && output.count == before && inputIndex < input.count {
                throw ArchiveError(archive: archive, fault: .malformed("inflate stalled at \(compressedPosition)"))
            }
        }
        try advance(output.count)
        return Output(bytes: output, boundaryBits: nil)
    }

    /// Reads the next chunk of compressed bytes, or fails: the stream has not ended and no byte is left.
    private func refill() throws {
        inputStart = compressedPosition
        let end: Int64 = switch kind {
        case .deflate(let end): min(end, source.size)
        case .gzip: source.size
        }
        let count = Int(min(Int64(Self.chunkLength), end - inputStart))
        guard count > 0 else {
            throw ArchiveError(archive: archive, fault: .truncated("a compressed stream (at byte \(inputStart))"))
        }
        input = try source.readExactly(offset: inputStart, count: count, archive: archive,
                                       what: "a compressed stream")
        inputIndex = 0
        compressedRead += Int64(count)
    }

    /// After a deflate stream's end: a zip member is done; a gzip member is followed by another or by the end.
    private func endOfStream() throws {
        guard case .gzip = kind else {
            finished = true
            return
        }
        var next = compressedPosition
        if rawInGzip { next += 8 }  // the member's CRC-32 and length, which raw inflate leaves
        guard next <= source.size else {
            throw ArchiveError(archive: archive, fault: .truncated("a gzip member's trailer"))
        }
        if next == source.size {
            finished = true
            return
        }
        let magic = try source.readExactly(offset: next, count: min(2, Int(source.size - next)), archive: archive,
                                           what: "a gzip member's header")
        guard magic == [0x1F, 0x8B] else { throw ArchiveError(archive: archive, fault: .trailingGarbage(offset: next)) }
        do {
            inflater = try Inflater(.gzip)
        } catch {
            throw ArchiveError(archive: archive, fault: .malformed(error.message))
        }
        rawInGzip = false
        input = []
        inputIndex = 0
        inputStart = next
    }

    /// Counts `produced` bytes, and fails when they are more than deflate gives from the compressed bytes read.
    private func advance(_ produced: Int) throws {
        position += Int64(produced)
        inflatedCount += Int64(produced)
        guard inflatedCount / limits.maximumInflationRatio <= compressedRead + 4096 else {
            throw ArchiveError(archive: archive, fault: .inflationRatio(member: "(the compressed stream)",
                                                                        size: inflatedCount, compressed: compressedRead))
        }
    }
}
