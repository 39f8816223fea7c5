// Object stores (S3 and the stores that speak its API: MinIO, R2, B2, Ceph RGW, Google Cloud Storage's XML API).
// An object is mounted by its plain https URL, its identity like any other file's (path style
// `https://ENDPOINT/BUCKET/KEY`, or virtual-hosted `https://BUCKET.s3.REGION.amazonaws.com/KEY` on AWS), so the
// catalog, the cache, the saved listings and redaction need nothing of their own. What makes an origin an object
// store is its record in the credential table (`ObjectStoreAccess`): requests to it are signed (SignatureV4),
// carry `If-Match` instead of `If-Range`, and its directories are listed with ListObjectsV2 (ObjectListing).

import RangeFSPlatform
import RangeFSSystem


/// How requests reach one object-store origin: the region they are signed for, whether the bucket is the URL's
/// first path segment (path style) or its host's first label, and the key (nil: anonymous requests, unsigned).
package struct ObjectStoreAccess: Codable, Sendable, Equatable {
    package var region: String
    package var pathStyle: Bool
    package var key: ObjectStoreKey?
    /// "s3", the service name requests are signed for.
    package var service = "s3"
}

/// What `s3://` and `gs://` sources mean in a mount: the endpoint (nil: AWS's regional one), the region, the
/// addressing, and the key requests are signed with (nil: anonymous). Set once from the command line and the
/// environment (MountRunner), before the sources are adopted.
package struct ObjectStoreDefaults: Sendable, Equatable {
    package var endpoint: String?
    package var region = "us-east-1"
    /// Nil: path style for a given endpoint (MinIO, moto and rclone want it), virtual-hosted on AWS when the
    /// bucket's name can be a host name.
    package var pathStyle: Bool?
    package var key: ObjectStoreKey?
    /// The key of `gs://` sources: Google Cloud Storage's HMAC key, named apart (`--gs-profile`) so that an AWS key
    /// is never sent to Google. Nil: anonymous.
    package var googleKey: ObjectStoreKey?

    package init(endpoint: String? = nil, region: String = "us-east-1", pathStyle: Bool? = nil,
                 key: ObjectStoreKey? = nil, googleKey: ObjectStoreKey? = nil) {
        self.endpoint = endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.key = key
        self.googleKey = googleKey
    }
}

/// The URLs of object stores: identities from `s3://` and `gs://` sources, and the bucket and prefix a directory's
/// listing asks for.
package enum ObjectStoreURL {
    /// Google Cloud Storage's S3-compatible XML API.
    package static let googleEndpoint = "https://storage.googleapis.com"

    /// `s3://BUCKET/KEY` or `gs://BUCKET/PREFIX/` as the https identity it is mounted by, and the access its origin
    /// needs; nil for any other URL. The key's segments are percent-encoded as a listing's children are.
    package static func identity(of source: String, defaults: ObjectStoreDefaults) -> (url: String, access: ObjectStoreAccess)? {
        let lower = source.lowercased()
        let google = lower.hasPrefix("gs://")
        guard google || lower.hasPrefix("s3://") else { return nil }
        let rest = source.dropFirst(5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let bucket = String(rest[..<slash])
        guard isBucketName(bucket) else { return nil }
        let key = slash < rest.endIndex ? String(rest[rest.index(after: slash)...]) : ""
        // A key is taken as written, as the AWS tools take it: `report%202024.pdf` is that name, not one with a space.
        let path = key.split(separator: "/", omittingEmptySubsequences: false)
            .map { PercentEncoding.segment(String($0)) }.joined(separator: "/")
        if google {
            // Google's own HMAC key when one was named for it (`--gs-profile`), else anonymous: the AWS key of the
            // environment is not Google's, and its id and token must not go there.
            let access = ObjectStoreAccess(region: "auto", pathStyle: true, key: defaults.googleKey)
            return ("\(googleEndpoint)/\(bucket)/\(path)", access)
        }
        let endpoint = defaults.endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        let virtualHosted = defaults.pathStyle.map { !$0 }
            ?? (endpoint == nil && !bucket.contains(".") && bucket == bucket.lowercased())
        let access = ObjectStoreAccess(region: defaults.region, pathStyle: !virtualHosted, key: defaults.key)
        let origin = endpoint ?? "https://s3.\(defaults.region).amazonaws.com"
        guard virtualHosted, let schemeEnd = origin.firstRange(of: "://") else {
            return ("\(origin)/\(bucket)/\(path)", access)
        }
        let host = origin[schemeEnd.upperBound...]
        return ("\(origin[..<schemeEnd.upperBound])\(bucket).\(host)/\(path)", access)
    }

    /// S3's rule for bucket names, loosely: 3-63 of lowercase letters, digits, `.`, `-` and `_` (older buckets).
    /// What fails it is not a bucket, and the source is refused rather than sent anywhere.
    package static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    /// Where ListObjectsV2 is asked for the directory `url` (an identity ending in `/`): the bucket's URL, path
    /// style `https://ENDPOINT/BUCKET`, virtual-hosted `https://BUCKET.HOST/`; and the key prefix, decoded. Nil
    /// when `url` names no bucket.
    package static func listing(of url: String, access: ObjectStoreAccess) -> (bucketURL: String, prefix: String)? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        guard let pathStart = rest.firstIndex(of: "/") else { return nil }
        let origin = String(url[..<pathStart])
        var segments = rest[rest.index(after: pathStart)...].split(separator: "/", omittingEmptySubsequences: false)
        if segments.last == "" { segments.removeLast() }
        if access.pathStyle {
            guard let bucket = segments.first, !bucket.isEmpty else { return nil }
            let prefix = segments.dropFirst().map { PercentEncoding.decode(String($0)) + "/" }.joined()
            return ("\(origin)/\(bucket)", prefix)
        }
        return (origin + "/", segments.map { PercentEncoding.decode(String($0)) + "/" }.joined())
    }

    /// `url` as SigV4 signs it: each path segment encoded once, the query sorted and encoded. Sent so, what the
    /// store reads is what was signed, whichever of the spellings of a key it was given (`'` or `%27`).
    package static func canonical(_ url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        let pathAndQuery = rest[pathStart...]
        let queryStart = pathAndQuery.firstIndex(of: "?")
        let path = String(pathAndQuery[..<(queryStart ?? pathAndQuery.endIndex)])
        var canonical = String(url[..<pathStart]) + SignatureV4.canonicalURI(path: path.isEmpty ? "/" : path)
        if let queryStart {
            canonical += "?" + SignatureV4.canonicalQuery(String(pathAndQuery[pathAndQuery.index(after: queryStart)...]))
        }
        return canonical
    }

    /// One page of ListObjectsV2 of the keys right under `prefix`: its query in SigV4's canonical form (sorted,
    /// every byte but `A-Za-z0-9-_.~` escaped), so what is sent is what is signed.
    package static func listURL(bucketURL: String, prefix: String, continuation: String?) -> String {
        var items = [("delimiter", "/"), ("encoding-type", "url"), ("list-type", "2"), ("prefix", prefix)]
        if let continuation { items.append(("continuation-token", continuation)) }
        let query = items.sorted { $0.0 < $1.0 }
            .map { "\($0.0)=\(SignatureV4.uriEncode($0.1, encodeSlash: true))" }.joined(separator: "&")
        return "\(bucketURL)?\(query)"
    }
}
