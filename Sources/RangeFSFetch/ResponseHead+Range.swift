// Which bytes of the file an answer carries, judged in one place from its status and Content-Range against the
// range asked for. Every reader of a GET's answer asks here: the probe (ProbedMetadata.swift), the probe
// that brings the first bytes (FirstBytes.swift, and through ProbeBody the BlockSink it hands over to), block
// fetches and whole-file streams (BlockSink.swift), those of files without a length included.
//
// A 206 carries the part its Content-Range names; its reader still checks that the part fits what it asked for
// (a 206 may bring less than asked). A 200 is the whole file (a server that ignores Range, or a changed file under
// If-Range), except one case: `rclone serve s3` (1.75) answers a Range GET with 200 and sends only the range, with
// `Content-Range: bytes 0-99/3893` (gofakes3 fixed it in 2026, rclone's fork did not). A 200 whose Content-Range is
// exactly the range asked for (the same first byte; the same last byte, or the file's last byte where the ask ran
// past the end) is read as that 206. Its body then passes the checks of a 206's body (ResponseHead+Trust.swift:
// Content-Length equal to the span, no foreign encoding), and, as it cannot have answered If-Range, its reader
// compares its validators with the cached ones (BlockSink).
//
// A 200 with any other Content-Range names bytes that are neither the ones asked for nor (read as a whole file)
// the ones it carries: it is a wrong Content-Range, refused like a 206's that does not fit, so none of its bytes
// is kept and no change of the file is read into it. Only a Content-Range that names the whole file, with a
// Content-Length to match where one is sent, leaves a 200 its whole-file meaning.

/// What an answer to a GET carries.
enum CarriedBytes: Equatable, Sendable {
    /// A part of the file, as its Content-Range names it: a 206, or a 200 whose Content-Range is exactly the
    /// range asked for.
    case part(ContentRange)
    /// The whole file from its first byte: a 200 without a Content-Range, or with one that names the whole file.
    case wholeFile
    /// A Content-Range missing where one is needed, unreadable, or naming other bytes than a 200 may carry; the
    /// value is what the server sent, for `FetchError.badContentRange`.
    case wrongRange(String)
    /// No body of the file at all: any status but 200 and 206 (the reader judges it, `ResponseHead.statusError`).
    case otherStatus
}

extension ResponseHead {
    /// What this answer to a request for `asked` (nil: the whole file, asked for without a Range header) carries.
    func carriedBytes(asked: Range<UInt64>?) -> CarriedBytes {
        let value = self["content-range"]
        switch status {
        case 206:
            guard asked != nil else { return .wrongRange("206 to a request without Range") }
            guard let value, let contentRange = ContentRange(parsing: value) else {
                return .wrongRange(value ?? "(missing)")
            }
            return .part(contentRange)
        case 200:
            guard let value else { return .wholeFile }
            guard let contentRange = ContentRange(parsing: value), let range = contentRange.range else {
                return .wrongRange(value)
            }
            if let asked, Self.isExactly(range, asked: asked, completeLength: contentRange.completeLength) {
                return .part(contentRange)
            }
            if let total = contentRange.completeLength, range == 0..<total, statesLength(total) {
                return .wholeFile
            }
            return .wrongRange(value)
        default:
            return .otherStatus
        }
    }

    /// Whether `range` is the one asked for: the same first byte, and the same last byte or, where the ask ran
    /// past the end of a file of `completeLength` bytes, the file's last byte.
    private static func isExactly(_ range: Range<UInt64>, asked: Range<UInt64>, completeLength: UInt64?) -> Bool {
        guard range.lowerBound == asked.lowerBound else { return false }
        if range.upperBound == asked.upperBound { return true }
        guard let completeLength else { return false }
        return asked.upperBound > completeLength && range.upperBound == completeLength
    }

    /// Whether the Content-Length, if one is sent, is `length`.
    private func statesLength(_ length: UInt64) -> Bool {
        guard let stated = self["content-length"] else { return true }
        return UInt64(stated.trimmingWhitespace()) == length
    }
}

extension ContentRange {
    /// Whether this part is one a reader that asked for `asked` can take: it starts at the first byte asked for
    /// and ends within the ask (a 206 may bring less than asked; the rest is asked for again).
    func fits(_ asked: Range<UInt64>) -> Bool {
        guard let range else { return false }
        return range.lowerBound == asked.lowerBound && range.upperBound <= asked.upperBound && !range.isEmpty
    }
}
