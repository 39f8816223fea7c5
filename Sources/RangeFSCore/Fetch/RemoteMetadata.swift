import Foundation

// What a probe learns about a URL, and the pure parsing of the response headers that carry it.

/// A remote file's identity: size, validators and the name its server suggests.
public struct RemoteMetadata: Sendable, Equatable {
    public var url: String
    public var size: UInt64
    /// The strong or weak ETag as sent, quotes included; empty if none.
    public var etag: String
    /// The Last-Modified header as sent; empty if none.
    public var lastModified: String
    /// The filename from Content-Disposition, if any.
    public var suggestedName: String?

    public init(url: String, size: UInt64, etag: String, lastModified: String, suggestedName: String? = nil) {
        self.url = url
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.suggestedName = suggestedName
    }

    /// Seconds since 1970 from Last-Modified, or nil when absent or unparsable.
    public var modificationTime: Int64? { HTTPDate.parse(lastModified) }

    /// The value to send as If-Range: the ETag if it is strong, else Last-Modified, else nothing.
    /// RFC 9110 forbids weak ETags in If-Range.
    public var ifRangeValidator: String? {
        if !etag.isEmpty && !etag.hasPrefix("W/") { return etag }
        return lastModified.isEmpty ? nil : lastModified
    }

    /// Whether a cache built for `self` still holds the bytes of `other`.
    public func describesSameContent(as other: RemoteMetadata) -> Bool {
        guard size == other.size else { return false }
        if !etag.isEmpty || !other.etag.isEmpty { return etag == other.etag }
        return lastModified == other.lastModified
    }

    /// Interprets the answer to a probe (`GET` with `Range: bytes=0-0`).
    public init(url: String, probeResponse head: ResponseHead) throws(FetchError) {
        // `http://host/pub` redirected to `http://host/pub/`: a directory, as web servers answer for one.
        if let effective = head.effectiveURL, !url.hasSuffix("/"), effective == url + "/" {
            throw .isDirectory(effective)
        }
        let size: UInt64
        switch head.status {
        case 206:
            guard let value = head["content-range"], let range = ContentRange(parsing: value),
                  let total = range.completeLength
            else { throw .badContentRange(head["content-range"] ?? "(missing)") }
            size = total
        case 200:
            guard let value = head["content-length"], let length = UInt64(value) else { throw .unknownSize }
            size = length
        case 416:
            // An empty file cannot satisfy bytes=0-0; servers say so with `Content-Range: bytes */0`.
            guard let value = head["content-range"], let range = ContentRange(parsing: value),
                  range.completeLength == 0
            else { throw .httpStatus(416) }
            size = 0
        default:
            throw .httpStatus(head.status)
        }
        self.init(
            url: url, size: size, etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "",
            suggestedName: head["content-disposition"].flatMap(ContentDisposition.filename(from:))
        )
    }
}
