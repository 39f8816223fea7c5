// A remote file's identity as the cache records it (in each entry's header) and matches it.
import RangeFSSystem

/// A remote file's identity: size, validators and the name its server suggests.
public struct RemoteMetadata: Sendable, Equatable {
    public var url: String
    /// The size in bytes; 0 while `sizeKnown` is false.
    public var size: UInt64
    /// Whether the server said how big the file is. A response without Content-Length (chunked, or ended by
    /// closing the connection) gives a file of unknown size, streamed from start to end into an entry of unknown
    /// size until its body ends (CacheStore+SettledSize.swift).
    public var sizeKnown = true
    /// The strong or weak ETag as sent, quotes included; empty if none.
    public var etag: String
    /// The Last-Modified header as sent; empty if none.
    public var lastModified: String
    /// The filename from Content-Disposition, if any.
    package var suggestedName: String?
    /// Other URLs of the same file, from the probe's `Link: <URL>; rel=duplicate` headers (RFC 6249); used as
    /// mirrors with `--mirrors-from-links`. Not part of the file's identity (see `Duplicates`), and not stored.
    package var duplicates: [String] {
        get { announced.urls }
        set { announced.urls = newValue }
    }
    /// The whole file's digest, as a response's `Repr-Digest` or `Digest` header announced it. Not part of the
    /// file's identity, and not stored in the header (the entry's digest record keeps it once it is checked).
    package var announcedDigest: ContentDigest? {
        get { announced.digest }
        set { announced.digest = newValue }
    }
    /// When the server answered with this version, by its own clock: the answer's `Date` header, to the second
    /// (seconds since 1970); for a cached version, that of the answer it was cached from (its header keeps it).
    /// nil when unknown. Listing dates are the server's clock too, so a client clock ahead of the server's cannot
    /// make a changed file look unchanged (ListedDate.swift). Not part of the file's identity.
    package var answeredAt: Int64? {
        get { announced.answeredAt }
        set { announced.answeredAt = newValue }
    }
    private var announced = Announced()

    /// Seconds since 1970 from Last-Modified, or nil when absent or unparsable. Here, not with the probe's parsing
    /// (Fetch/), as the catalog (CatalogNode) dates its files with it and uses only Cache and System.
    package var modificationTime: Int64? { HTTPDate.parse(lastModified) }

    /// The largest size a file can have: an `off_t`, as the cache's header allows. A server's larger number is not
    /// a size (it would overflow the cache's block arithmetic and stop the mount).
    package static let largestSize = UInt64(Int64.max)

    /// What a response announces besides the file's identity: never makes two descriptions of a file differ.
    private struct Announced: Equatable, Sendable {
        var urls: [String] = []
        var digest: ContentDigest?
        var answeredAt: Int64?
        static func == (lhs: Self, rhs: Self) -> Bool { true }
    }

    public init(url: String, size: UInt64, etag: String, lastModified: String, suggestedName: String? = nil) {
        self.url = url
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.suggestedName = suggestedName
    }

    /// The value to send as If-Range: the ETag if it is strong, else Last-Modified, else nothing.
    /// RFC 9110 forbids weak ETags in If-Range.
    package var ifRangeValidator: String? {
        if !etag.isEmpty && !etag.hasPrefix("W/") { return etag }
        return lastModified.isEmpty ? nil : lastModified
    }

    /// Whether a cache built for `self` still holds the bytes of `other`. Without a size on one side, only the
    /// validators can tell; a stream without any validator is taken to be the one cached.
    /// ETags are compared where both sides have one; where one side has none (its server sends none, or its
    /// ETags were found to rotate and were retired, see `etagRotated`), Last-Modified tells.
    package func describesSameContent(as other: RemoteMetadata) -> Bool {
        guard size == other.size || !sizeKnown || !other.sizeKnown else { return false }
        if !etag.isEmpty && !other.etag.isEmpty { return etag == other.etag }
        return lastModified == other.lastModified
    }

    /// Whether `other` differs from this only by its ETag: same length, same Last-Modified (or none on either
    /// side), another ETag. That is what a load balancer in front of nodes that make their own ETags sends for one
    /// file: the ETag is then no validator for that server, and length and Last-Modified (where it sends one) are
    /// used instead. A server without Last-Modified is judged the same way (RotatingETags.swift): two answers tell
    /// a rotation from a replaced file, so its files are not locked out with ESTALE on every open.
    package func etagRotated(to other: RemoteMetadata) -> Bool {
        sizeKnown && other.sizeKnown && size == other.size && lastModified == other.lastModified
            && !etag.isEmpty && !other.etag.isEmpty && etag != other.etag
    }

    /// Whether an answer that describes its bytes as `other` says they are not of this version, by whatever both
    /// sides state: another length, another ETag (weak ones too: `W/"a"` then `W/"b"` is a change, though neither
    /// could condition the request), or another Last-Modified. ETags are compared as RFC 9110's weak comparison
    /// does (§8.8.3.2: `W/"a"` and `"a"` name the same version, as a server that weakens its ETag on some answers
    /// sends). A 206 is of the version asked for only when it answered a condition: a request sent without one (no
    /// strong ETag, no date to send) is checked this way, and so is every other 206. What neither side states
    /// cannot tell (DESIGN.md §4, "Validators").
    package func isContradicted(by other: RemoteMetadata) -> Bool {
        if sizeKnown && other.sizeKnown && size != other.size { return true }
        func opaque(_ tag: String) -> Substring { tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag) }
        if !etag.isEmpty && !other.etag.isEmpty && opaque(etag) != opaque(other.etag) { return true }
        return !lastModified.isEmpty && !other.lastModified.isEmpty && lastModified != other.lastModified
    }

    /// A file of unknown size, as a probe without a length finds it.
    package static func unsized(url: String, etag: String, lastModified: String,
                               suggestedName: String? = nil) -> RemoteMetadata {
        var metadata = RemoteMetadata(url: url, size: 0, etag: etag, lastModified: lastModified,
                                      suggestedName: suggestedName)
        metadata.sizeKnown = false
        return metadata
    }
}
