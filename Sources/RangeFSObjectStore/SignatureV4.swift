// AWS Signature Version 4, as S3 and the stores that speak its API (MinIO, Ceph, rclone serve s3, GCS's XML API
// with HMAC keys) check it on every request. The signature is an HMAC-SHA256 chain over a canonical form of the
// request, so the whole difficulty is canonicalisation: the store rebuilds the same text from what it received,
// and one byte of difference is a 403 SignatureDoesNotMatch. The rules here are S3's:
//   - the path: each segment percent-decoded once, then encoded with UriEncode (only `A-Za-z0-9-_.~` kept, the
//     rest `%XX` in uppercase hex of its UTF-8), `/` kept between segments. S3 encodes once (other AWS services
//     encode twice); rclone decodes and re-encodes the path it received, so the path sent must be this one too;
//   - the query: names and values decoded, then UriEncoded with `/` too, sorted by name then value, `name=` for an
//     empty value. A `+` in a query is a plus (`%2B`), never a space;
//   - the headers: the host as the request sends it (with the port when it is not the scheme's default: both
//     test stores refuse a signed host that differs from the sent one), and every header given, lowercased,
//     values trimmed, sorted.
// libcurl's CURLOPT_AWS_SIGV4 is not used: curl 7.88 signs the listing query unsorted and unencoded (DESIGN §10).
// Nothing here logs: the Authorization line is derived from the secret.

import RangeFSPlatform
import RangeFSSystem

/// Signs requests to an object store with AWS Signature Version 4 (header form, single chunk).
package enum SignatureV4 {
    /// The payload hash S3 accepts for a request whose body is not signed (a GET has none).
    package static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// The headers to add to a request so that the store accepts it, in this order: `Host` (unless `headers` has
    /// one: it is signed, so the request must send this exact line), `x-amz-date`, `x-amz-content-sha256` (for
    /// service `s3` only: S3 requires it, other AWS services do not know it), `x-amz-security-token` when the key
    /// has a session token, and `Authorization`. `headers` are the other headers the request sends that must be
    /// signed (e.g. `Range`, `If-Match`); all of them are signed. `time` is seconds since 1970 (UTC): a store
    /// refuses a request more than 15 minutes away from its clock. `url` must be sent as
    /// `canonicalURI`/`canonicalQuery` write it, since what is signed is what the store reads.
    package static func headers(method: String, url: String, headers: [(name: String, value: String)], key: ObjectStoreKey,
                        region: String, service: String, time: Int64,
                        payloadHash: String = unsignedPayload) -> [(name: String, value: String)] {
        let target = TargetURL(url)
        let date = amzDate(time)
        var added: [(name: String, value: String)] = []
        if !headers.contains(where: { $0.name.lowercased() == "host" }) { added.append(("Host", target.host)) }
        added.append(("x-amz-date", date))
        if service == "s3" { added.append(("x-amz-content-sha256", payloadHash)) }
        if let token = key.sessionToken { added.append(("x-amz-security-token", token)) }
        let canonical = canonicalRequest(method: method, url: url, headers: headers + added, payloadHash: payloadHash)
        let scope = "\(date.prefix(8))/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(date)\n\(scope)\n" + sha256Hex(Array(canonical.text.utf8))
        var signingKey = Array("AWS4\(key.secretAccessKey)".utf8)
        for part in [String(date.prefix(8)), region, service, "aws4_request"] {
            signingKey = HMACSHA256.authenticate(key: signingKey, message: Array(part.utf8))
        }
        let signature = hex(HMACSHA256.authenticate(key: signingKey, message: Array(stringToSign.utf8)))
        added.append(("Authorization", "AWS4-HMAC-SHA256 Credential=\(key.accessKeyID)/\(scope), "
                      + "SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"))
        return added
    }

    /// The canonical request of SigV4 (method, canonical URI, canonical query, canonical headers, signed header
    /// names, payload hash, one per line) over exactly the `headers` given, and its signed-header list
    /// (`host;range;x-amz-date`). Headers named twice are joined with commas, in the order given.
    package static func canonicalRequest(method: String, url: String, headers: [(name: String, value: String)],
                                 payloadHash: String) -> (text: String, signedHeaders: String) {
        let target = TargetURL(url)
        var values: [String: [String]] = [:]
        for header in headers { values[header.name.lowercased(), default: []].append(canonicalValue(header.value)) }
        let names = values.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(values[$0, default: []].joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let text = [method, canonicalURI(path: target.path), canonicalQuery(target.query), canonicalHeaders,
                    signedHeaders, payloadHash].joined(separator: "\n")
        return (text, signedHeaders)
    }

    /// The path as S3 signs it: each segment percent-decoded, then UriEncoded once; `/` kept. An empty path is `/`.
    package static func canonicalURI(path: String) -> String {
        guard !path.isEmpty else { return "/" }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let encoded = segments.map { uriEncode(bytes: PercentEncoding.bytes(String($0)), encodeSlash: true) }
            .joined(separator: "/")
        return encoded.hasPrefix("/") ? encoded : "/" + encoded
    }

    /// The query as SigV4 signs it: each name and value percent-decoded, then UriEncoded (`/` too), the pairs
    /// sorted by name then value, an empty or missing value written `name=`.
    package static func canonicalQuery(_ query: String) -> String {
        let pairs = query.split(separator: "&").map { pair -> (name: String, value: String) in
            let equals = pair.firstIndex(of: "=") ?? pair.endIndex
            let value = equals < pair.endIndex ? pair[pair.index(after: equals)...] : ""
            return (uriEncode(bytes: PercentEncoding.bytes(String(pair[..<equals])), encodeSlash: true),
                    uriEncode(bytes: PercentEncoding.bytes(String(value)), encodeSlash: true))
        }
        // The encoded forms are ASCII, so String order is byte order, as SigV4 asks.
        return pairs.sorted { $0.name != $1.name ? $0.name < $1.name : $0.value < $1.value }
            .map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    /// SigV4's UriEncode: `A-Za-z0-9-_.~` kept, every other byte of the UTF-8 written `%XX` in uppercase hex;
    /// `/` kept unless `encodeSlash`.
    package static func uriEncode(_ text: String, encodeSlash: Bool) -> String {
        uriEncode(bytes: Array(text.utf8), encodeSlash: encodeSlash)
    }

    /// `time` (seconds since 1970) as SigV4's `x-amz-date`: `20130524T000000Z`. Its first 8 characters are the
    /// date of the credential scope.
    package static func amzDate(_ time: Int64) -> String {
        let date = HTTPDate.civil(time)
        func digits(_ value: Int64, _ count: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, count - text.count)) + text
        }
        return digits(date.year, 4) + digits(date.month, 2) + digits(date.day, 2) + "T"
            + digits(date.hour, 2) + digits(date.minute, 2) + digits(date.second, 2) + "Z"
    }

    private static func uriEncode(bytes: [UInt8], encodeSlash: Bool) -> String {
        let hexDigits = Array("0123456789ABCDEF".utf8)
        var encoded: [UInt8] = []
        encoded.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                 UInt8(ascii: "~"):
                encoded.append(byte)
            case UInt8(ascii: "/") where !encodeSlash:
                encoded.append(byte)
            default:
                encoded += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// A header value as SigV4 signs it: white space trimmed at both ends, and runs of it inside made one space.
    private static func canonicalValue(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    private static func sha256Hex(_ bytes: [UInt8]) -> String {
        let hasher = DigestHasher(.sha256)
        hasher.update(bytes)
        return hasher.finish().hex
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// The parts of a URL the signature covers. Lenient: the URLs come from identities that are http(s) already.
    private struct TargetURL {
        /// `host` or `host:port` (lowercased, without userinfo), the port only when not the scheme's default.
        package var host: String
        package var path: String
        package var query: String

        package init(_ url: String) {
            let schemeEnd = url.firstRange(of: "://")
            let scheme = schemeEnd.map { url[..<$0.lowerBound].lowercased() } ?? ""
            let rest = schemeEnd.map { url[$0.upperBound...] } ?? url[...]
            let withoutFragment = rest[..<(rest.firstIndex(of: "#") ?? rest.endIndex)]
            let authorityEnd = withoutFragment.firstIndex(where: { $0 == "/" || $0 == "?" })
                ?? withoutFragment.endIndex
            let authority = withoutFragment[..<authorityEnd]
            let hostStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
            var host = authority[hostStart...]
            if let colon = host.lastIndex(of: ":"), !host[colon...].contains("]") {
                let port = host[host.index(after: colon)...]
                if port.isEmpty || (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
                    host = host[..<colon]
                }
            }
            self.host = host.lowercased()
            let pathAndQuery = withoutFragment[authorityEnd...]
            let questionMark = pathAndQuery.firstIndex(of: "?") ?? pathAndQuery.endIndex
            path = String(pathAndQuery[..<questionMark])
            query = questionMark < pathAndQuery.endIndex
                ? String(pathAndQuery[pathAndQuery.index(after: questionMark)...]) : ""
        }
    }
}
