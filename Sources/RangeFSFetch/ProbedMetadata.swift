import FoundationEssentials
import RangeFSCache
import RangeFSPlatform
import RangeFSSystem

// What a probe learns about a URL: the file's identity (Cache's RemoteMetadata) read from the response headers
// that carry it. Fetch's own type, not an extension of the cache's: Fetch adds nothing to a lower layer's types.

package enum ProbedMetadata {
    /// Interprets the answer to a probe (`GET` with `Range: bytes=0-0`), or to a probe that asked for the bytes
    /// `asked` (FirstBytes.swift asks for more than one).
    package static func read(url: String, probeResponse head: ResponseHead,
                             asked: Range<UInt64> = 0..<1) throws(FetchError) -> RemoteMetadata {
        // `http://host/pub` redirected to `http://host/pub/`: a directory, as web servers answer for one.
        if let effective = head.effectiveURL, !url.hasSuffix("/"), effective == url + "/" {
            throw .isDirectory(effective)
        }
        let size: UInt64?
        switch head.carriedBytes(asked: asked) {
        case .part(let contentRange):
            // A 206, or a 200 with exactly the range asked for (rclone serve s3): the total is the file's size.
            size = contentRange.completeLength  // `bytes 0-0/*`: the server does not know the length either
        case .wholeFile:
            // No Content-Length: a chunked or close-delimited body, whose size shows only at its end.
            size = head["content-length"].flatMap { UInt64($0) }.flatMap { $0 <= ContentRange.largestLength ? $0 : nil }
        case .wrongRange(let value):
            throw .badContentRange(value)
        case .otherStatus:
            // Only an empty file cannot satisfy a range from its first byte (RFC 9110 §14.1.1): web servers say so
            // with `Content-Range: bytes */0`, S3 servers with a 416 InvalidRange and no Content-Range at all
            // (every `_SUCCESS` marker of a data lake). A Content-Range that states a length is believed instead.
            guard head.status == 416, asked.lowerBound == 0,
                  head["content-range"].map({ ContentRange(parsing: $0)?.completeLength == 0 }) ?? true
            else { throw head.statusError }
            size = 0
        }
        var metadata = RemoteMetadata(
            url: url, size: size ?? 0, etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "",
            suggestedName: head["content-disposition"].flatMap(ContentDisposition.filename(from:))
        )
        metadata.sizeKnown = size != nil
        metadata.duplicates = duplicates(inLink: head["link"], base: head.effectiveURL ?? url)
        metadata.announcedDigest = digest(reprDigest: head["repr-digest"], digest: head["digest"])
        // A Date before 1970 is no moment worth keeping (the header stores unknown as 0).
        metadata.answeredAt = head["date"].flatMap(HTTPDate.parse).flatMap { $0 > 0 ? $0 : nil }
        return metadata
    }

    /// The digest of the whole file a response announces: `Repr-Digest: sha-256=:BASE64:` (RFC 9530; it describes
    /// the representation, so a 206 carries the whole file's) or the older `Digest: SHA-256=BASE64` (RFC 3230).
    /// SHA-256 is taken before SHA-512 (it is the faster to check); other algorithms are ignored.
    static func digest(reprDigest: String?, digest: String?) -> ContentDigest? {
        func members(_ value: String?) -> [(String, String)] {
            (value ?? "").split(separator: ",").compactMap { member in
                guard let equals = member.firstIndex(of: "=") else { return nil }
                let key = member[..<equals].trimmingWhitespace().lowercased()
                var value = member[member.index(after: equals)...].trimmingWhitespace()
                // A structured field's byte sequence is wrapped in colons; parameters after `;` are ignored.
                if let semicolon = value.firstIndex(of: ";") { value = String(value[..<semicolon]) }
                return (key, value.trimmed(while: { $0 == ":" }))
            }
        }
        let found = members(reprDigest) + members(digest)
        for algorithm in [DigestAlgorithm.sha256, .sha512] {
            let names = algorithm == .sha256 ? ["sha-256", "sha256"] : ["sha-512", "sha512"]
            for (key, value) in found where names.contains(key) {
                if let decoded = Data(base64Encoded: value),
                   let digest = ContentDigest(algorithm: algorithm, bytes: Array(decoded)) {
                    return digest
                }
            }
        }
        return nil
    }

    /// The URLs a `Link` header names as duplicates of the response (`<URL>; rel=duplicate`, RFC 6249), made
    /// absolute against `base`; only http(s) ones.
    static func duplicates(inLink value: String?, base: String) -> [String] {
        guard let value else { return [] }
        var found: [String] = []
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            let target = String(rest[rest.index(after: open)..<close])
            // The parameters run to the next link (a comma outside <>), or the end.
            let after = rest[rest.index(after: close)...]
            let end = after.firstIndex(of: "<") ?? after.endIndex
            let parameters = after[..<end].lowercased().replacing(" ", with: "")
            rest = after[end...]
            let relations = parameters.split(separator: ";").compactMap { parameter -> [Substring]? in
                guard parameter.hasPrefix("rel=") else { return nil }
                return parameter.dropFirst(4).trimmed(while: { $0 == "\"" || $0 == "," }).split(separator: " ")
            }.flatMap { $0 }
            guard relations.contains("duplicate"),
                  let absolute = URL(string: target, relativeTo: URL(string: base))?.absoluteString,
                  absolute.hasPrefix("http://") || absolute.hasPrefix("https://") else { continue }
            found.append(absolute)
        }
        return found
    }
}
