// Reads the two object-store servers' logs into one shape, so that a test counts LISTs, object GETs and HEADs the
// same way on moto and rclone. Both servers write a request's line before its answer's body (werkzeug when it sends
// the status line, rclone when its handler starts), so a request whose answer the client saw is always counted.
//
// moto (werkzeug's access log, on stderr): `127.0.0.1 - - [date] "GET /bkt?list-type=2&prefix=data/ HTTP/1.1" 200 -`,
// the request part wrapped in ANSI colour codes when the status is not 200; the target is logged as an IRI (UTF-8
// decoded, `%20` and `%25` kept). rclone (`-vv` into --log-file): `DEBUG : serve s3: LIST BUCKET` then, for a bucket
// that exists, `bucketname: bkt prefix: prefix:"data/", delim:"/" page: {...}`; `GET OBJECT Bucket: bkt Object: key`;
// `HEAD OBJECT bkt key`; `CREATE OBJECT: bkt key`; and, for any failed signature check, `INFO : serve s3: Access
// Denied: 127.0.0.1:PORT => /target`.

import Foundation

/// One request an object-store test server logged.
struct S3LoggedRequest: Equatable, CustomStringConvertible {
    enum Kind: String {
        /// ListObjects (V1 or V2): a GET of a bucket with no subresource.
        case list = "LIST"
        case get = "GET"
        case head = "HEAD"
        case put = "PUT"
        case delete = "DELETE"
        /// Refused for its signature or key: moto's 403, rclone's "Access Denied" (400 or 403 on the wire).
        case refused = "REFUSED"
        /// Anything else (ListBuckets, a bucket subresource, POST).
        case other = "OTHER"
    }

    var kind: Kind
    var bucket: String
    /// The object key, percent-decoded ("" for a bucket request). Empty for an rclone LIST of a missing bucket.
    var key: String
    /// moto: the query as logged and the status (`list-type=2&prefix=data/ 200`). rclone: a LIST's page line
    /// (`prefix:"data/", delim:"/" page: {Marker: HasMarker:false MaxKeys:1000}`), a refusal's query, else "".
    var detail: String

    /// `KIND /bucket[/key][ detail]`, e.g. `LIST /bkt list-type=2&prefix=data/ 200`, `GET /bkt/data/a b.txt 206`.
    var description: String {
        "\(kind.rawValue) /\(bucket)\(key.isEmpty ? "" : "/" + key)" + (detail.isEmpty ? "" : " " + detail)
    }

    /// The requests in moto's stderr `text`, leaving out the fixture's own (`/_rangefs/…`, `/moto-api/…`).
    static func parseMoto(_ text: String) -> [S3LoggedRequest] {
        text.split(separator: "\n").compactMap { line -> S3LoggedRequest? in
            guard let open = line.range(of: "] \"") else { return nil }
            let request = removingANSI(String(line[open.upperBound...]))
            guard let close = request.range(of: "\" ", options: .backwards) else { return nil }
            let words = request[..<close.lowerBound].split(separator: " ")
            let status = request[close.upperBound...].split(separator: " ").first.map(String.init) ?? "-"
            guard words.count == 3 else { return nil }
            let method = String(words[0])
            let target = String(words[1])
            if target.hasPrefix("/_rangefs/") || target.hasPrefix("/moto-api/") { return nil }
            let (bucket, key, query) = split(target)
            var kind: Kind
            switch method {
            case "GET": kind = key.isEmpty ? (bucket.isEmpty || !isListQuery(query) ? .other : .list) : .get
            case "HEAD": kind = key.isEmpty ? .other : .head
            case "PUT": kind = key.isEmpty ? .other : .put
            case "DELETE": kind = key.isEmpty ? .other : .delete
            default: kind = .other
            }
            if status == "403" { kind = .refused }
            return S3LoggedRequest(kind: kind, bucket: bucket, key: key,
                                   detail: query.isEmpty ? status : query + " " + status)
        }
    }

    /// The requests in rclone's `-vv` log `text`. A LIST takes the bucket and page of the next `bucketname:` line
    /// (rclone logs none for a missing bucket); with LISTs in parallel the pairing is by order, the count exact.
    static func parseRclone(_ text: String) -> [S3LoggedRequest] {
        var requests: [S3LoggedRequest] = []
        var unnamedList: Int?
        for line in text.split(separator: "\n") {
            guard let marker = line.range(of: " : serve s3: ") else { continue }
            let message = String(line[marker.upperBound...])
            if message == "LIST BUCKET" {
                unnamedList = requests.count
                requests.append(S3LoggedRequest(kind: .list, bucket: "", key: "", detail: ""))
            } else if message.hasPrefix("bucketname: "), let index = unnamedList {
                let rest = message.dropFirst("bucketname: ".count)
                let bucket = rest.prefix(while: { $0 != " " })
                requests[index].bucket = String(bucket)
                requests[index].detail = rest.range(of: " prefix: ").map { String(rest[$0.upperBound...]) } ?? ""
                unnamedList = nil
            } else if message.hasPrefix("GET OBJECT Bucket: "), let object = message.range(of: " Object: ") {
                let start = message.index(message.startIndex, offsetBy: "GET OBJECT Bucket: ".count)
                let bucket = message[start..<object.lowerBound]
                requests.append(S3LoggedRequest(kind: .get, bucket: String(bucket),
                                                key: String(message[object.upperBound...]), detail: ""))
            } else if let (bucket, key) = bucketAndKey(message, after: "HEAD OBJECT ") {
                requests.append(S3LoggedRequest(kind: .head, bucket: bucket, key: key, detail: ""))
            } else if let (bucket, key) = bucketAndKey(message, after: "CREATE OBJECT: ") {
                requests.append(S3LoggedRequest(kind: .put, bucket: bucket, key: key, detail: ""))
            } else if message.hasPrefix("Access Denied: "), let arrow = message.range(of: " => ") {
                let (bucket, key, query) = split(String(message[arrow.upperBound...]))
                requests.append(S3LoggedRequest(kind: .refused, bucket: bucket, key: key, detail: query))
            }
        }
        return requests
    }

    /// `/bucket/key?query` → (bucket, percent-decoded key, query).
    private static func split(_ target: String) -> (String, String, String) {
        let pathAndQuery = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = pathAndQuery[0].drop(while: { $0 == "/" })
        let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let bucket = parts.first.map(String.init) ?? ""
        let rawKey = parts.count > 1 ? String(parts[1]) : ""
        return (bucket, rawKey.removingPercentEncoding ?? rawKey, pathAndQuery.count > 1 ? String(pathAndQuery[1]) : "")
    }

    /// `NAME BUCKET KEY…` after `prefix` (the key may hold spaces; bucket names cannot).
    private static func bucketAndKey(_ message: String, after prefix: String) -> (String, String)? {
        guard message.hasPrefix(prefix) else { return nil }
        let rest = message.dropFirst(prefix.count)
        guard let space = rest.firstIndex(of: " ") else { return nil }
        return (String(rest[..<space]), String(rest[rest.index(after: space)...]))
    }

    /// Whether a bucket GET's query asks for a listing (only listing parameters, or none) rather than a
    /// subresource such as `?location` or `?policy`.
    private static func isListQuery(_ query: String) -> Bool {
        let listing: Set<Substring> = ["list-type", "prefix", "delimiter", "max-keys", "continuation-token",
                                       "start-after", "marker", "encoding-type", "fetch-owner", "x-id"]
        return query.split(separator: "&").allSatisfy { listing.contains($0.prefix(while: { $0 != "=" })) }
    }

    /// `text` without ANSI escape sequences (`ESC [ … m`).
    private static func removingANSI(_ text: String) -> String {
        var result = ""
        var inEscape = false
        for character in text {
            if character == "\u{1B}" { inEscape = true } else if inEscape { if character == "m" { inEscape = false } }
            else { result.append(character) }
        }
        return result
    }
}

extension Array where Element == S3LoggedRequest {
    /// How many requests of `kind` there were, for `bucket` if given and keys starting with `keyPrefix`.
    func count(_ kind: S3LoggedRequest.Kind, bucket: String? = nil, keyPrefix: String = "") -> Int {
        filter { $0.kind == kind && (bucket == nil || $0.bucket == bucket) && $0.key.hasPrefix(keyPrefix) }.count
    }
}
