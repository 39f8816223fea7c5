// One error type per subsystem (FetchError, CacheError, SystemError, FileSystemError). The FUSE adapter maps
// `FileSystemError` to errno in exactly one place; the CLI shows `FetchError.userMessage` when a URL cannot be mounted.
import RangeFSCache
import RangeFSSystem

/// Why a fetch or a probe failed.
public enum FetchError: Error, Sendable, Equatable {
    case malformedURL(String)
    /// The URL holds a character that must be percent-encoded (a raw space, say): the character, and its encoding.
    case needsPercentEncoding(character: String, encoded: String)
    case unsupportedScheme(String)
    case connectionRefused
    case hostNotFound
    case timedOut
    /// The server sent nothing for this many seconds in the middle of a request (`RangeRequest.stallTimeout`).
    case stalled(Double)
    case httpStatus(Int)
    /// The server still answered "not now" (503, S3's SlowDown, 429) after being asked again for this many seconds
    /// (ThrottleRetry.swift; 0: it asked for a wait longer than `--retry-time`). Not retried again.
    case serverBusy(status: Int, seconds: Int)
    /// 206 whose Content-Range does not match what was asked for (or is missing), or a 200 whose Content-Range
    /// names neither the bytes asked for nor the whole file (ResponseHead+Range.swift).
    case badContentRange(String)
    /// 200 to a ranged request although the validator still matches: the server ignores Range.
    case rangeIgnored
    /// 200 to a ranged request with another validator or size: the remote file changed.
    case remoteChanged
    /// The body ended before the requested range did.
    case shortBody
    /// An answer whose body is not the bytes its head names (another encoding than identity, a length other than
    /// its range's): refused whole, none of its bytes kept. The server's (or a proxy's) fault.
    case untrustedBody(String)
    case transport(String)
    case cancelled
    /// The server's certificate cannot be verified (libcurl's reason).
    case certificate(String)
    /// The client certificate or its key cannot be used.
    case clientCertificate(String)
    /// The CA certificates to verify with cannot be read.
    case caCertificates(String)
    /// The proxy (as configured, without credentials) cannot be reached, and why.
    case proxy(String, String)
    /// A server error (5xx) that came through this proxy: the proxy's own answer, or the server's.
    case proxyStatus(Int, String)
    /// A directory listing larger than the limit (bytes).
    case listingTooLarge(Int)
    /// The URL names a directory: the server redirected it to this URL, which ends in `/`.
    case isDirectory(String)
    /// An object store refused a request with this status and error code (`SignatureDoesNotMatch`...), for this
    /// bucket.
    case objectStore(status: Int, code: String, bucket: String)
    /// A listing that cannot be read, and why.
    case badListing(String)
    /// A directory listing that had not arrived whole this many seconds after it was asked for
    /// (`--listing-timeout`, ListingDeadline.swift): a server that sends it too slowly, or without end.
    case listingTimedOut(Double)

    /// A one-line explanation for a person, naming the fix where there is one.
    public var userMessage: String {
        switch self {
        case .malformedURL(let reason): "malformed URL (\(reason)); write it as http://host/path or https://host/path"
        case .needsPercentEncoding(let character, let encoded):
            "the URL contains \(character), which a URL cannot hold as it is; percent-encode it as \(encoded)"
        case .unsupportedScheme(let scheme):
            "not an http(s) URL (scheme '\(scheme)'); only http://, https://, s3://BUCKET/KEY and gs://BUCKET/KEY "
                + "can be mounted (a bucket's name is 3 to 63 letters, digits, '.', '-' or '_')"
        case .connectionRefused: "connection refused (check that the server is running and the port is right)"
        case .hostNotFound: "host not found; check the host name"
        case .timedOut: "timed out; the server did not answer in time"
        case .stalled(let seconds): "the server stopped sending (nothing for \(Int(seconds.rounded())) s)"
        case .httpStatus(let status) where status == 401 || status == 403: Self.loginAdvice(status)
        case .httpStatus(let status) where status >= 500 || status == 429:
            "HTTP \(status) \(Self.reasonPhrase(status)): the server failed or is overloaded (its fault, not the "
                + "URL's); try again later"
        case .httpStatus(let status): "HTTP \(status) \(Self.reasonPhrase(status)); check the URL"
        case .serverBusy(let status, let seconds):
            "HTTP \(status) \(Self.reasonPhrase(status)): the server is overloaded or limits its request rate, "
                + (seconds > 0 ? "and still was after \(seconds) s of asking again" : "and asks for a longer wait")
                + " (--retry-time); its fault, not the URL's: try again later"
        case .badContentRange(let value): "the server sent a wrong Content-Range (\(value))"
        case .rangeIgnored: "the server ignores Range requests"
        case .remoteChanged: "the remote file changed"
        case .shortBody: "the server closed the connection before sending the whole range"
        case .untrustedBody(let reason):
            "the server's answer was refused, none of its bytes kept: \(reason); the server (or a proxy or CDN in "
                + "front of it that rewrites answers) is at fault"
        case .transport(let message): message
        case .cancelled: "cancelled"
        case .certificate(let reason):
            "\(reason); if the server's certificate comes from a private CA, trust it with --cacert FILE (or "
                + "--capath DIR, or SSL_CERT_FILE), or skip the check with --insecure"
        case .clientCertificate(let reason): "the client certificate cannot be used (\(reason)); check --cert and --key"
        case .caCertificates(let reason):
            "the CA certificates cannot be read (\(reason)); check the file given with --cacert or SSL_CERT_FILE"
        case .proxy(let proxy, let reason):
            "cannot reach the proxy \(proxy) (\(reason)); check that the proxy is running, and check --proxy, or "
                + "http_proxy and https_proxy in the environment (--noproxy lists hosts reached directly)"
        case .proxyStatus(let status, let proxy):
            "HTTP \(status) \(Self.reasonPhrase(status)) through the proxy \(proxy); the proxy may be unable to reach "
                + "the server (see its log), or the server failed. Check --proxy, or pass --noproxy HOST to go direct"
        case .listingTooLarge(let limit): "the directory listing is larger than \(limit >> 20) MiB; it is not read"
        case .isDirectory(let url): "it is a directory (the server answers at \(Redaction.redact(url)))"
        case .objectStore(let status, let code, let bucket): Self.objectStoreAdvice(status, code, bucket)
        case .badListing(let reason): "the listing cannot be read: \(reason)"
        case .listingTimedOut(let seconds):
            "the directory listing did not arrive within \(Int(seconds.rounded())) s: the server sends it too slowly "
                + "or without end; if the directory is that large and the link that slow, raise --listing-timeout"
        }
    }

    /// The error's kind as a metrics label: a fixed word, never a message.
    var metricKind: String {
        switch self {
        case .malformedURL, .needsPercentEncoding, .unsupportedScheme: "bad_url"
        case .connectionRefused: "connection_refused"
        case .hostNotFound: "host_not_found"
        case .timedOut: "timed_out"
        case .stalled: "stalled"
        case .httpStatus(let status), .serverBusy(let status, _): status >= 500 ? "http_5xx" : "http_4xx"
        case .badContentRange: "bad_content_range"
        case .rangeIgnored: "range_ignored"
        case .remoteChanged: "remote_changed"
        case .shortBody: "cut_transfer"
        case .untrustedBody: "untrusted_body"
        case .transport: "transport"
        case .cancelled: "cancelled"
        case .certificate, .clientCertificate, .caCertificates: "tls"
        case .proxy, .proxyStatus: "proxy"
        case .listingTooLarge: "listing_too_large"
        case .isDirectory: "is_directory"
        case .objectStore(let status, _, _): status >= 500 ? "http_5xx" : "http_4xx"
        case .badListing: "bad_listing"
        case .listingTimedOut: "timed_out"
        }
    }

    /// Whether trying the same request again may succeed.
    var isTransient: Bool {
        switch self {
        // A wrong answer may come from one node of several behind a load balancer: another try may be right.
        case .timedOut, .stalled, .shortBody, .transport, .connectionRefused, .proxy, .untrustedBody: true
        case .httpStatus(let status): status == 408 || status == 429 || status >= 500
        case .proxyStatus: true
        // An expired session key: the next attempt is signed with the key its profile holds by then (the AWS
        // tools write a new one into the same file; Credentials.swift reads it again).
        case .objectStore(let status, let code, _):
            status == 408 || status == 429 || status >= 500 || code == "SlowDown" || code == "RequestTimeout"
                || code == "ExpiredToken"
                || code == "TokenRefreshRequired"
        default: false
        }
    }

    /// Whether the server kept the request waiting until it was given up (no answer, or it stopped sending).
    package var isTimeout: Bool {
        switch self {
        case .timedOut, .stalled, .listingTimedOut: true
        default: false
        }
    }

    /// Whether the failure says only that the server could not be reached or could not answer now (refused,
    /// unresolvable, timed out, cut off, or a 5xx), as opposed to an answer about the file itself. A file that
    /// fails this way at mount is served from its cache entry, and stays in the saved set.
    package var isOriginUnreachable: Bool {
        switch self {
        case .connectionRefused, .hostNotFound, .timedOut, .stalled, .shortBody, .transport, .proxy, .proxyStatus,
             .serverBusy, .listingTimedOut: true
        case .httpStatus(let status): status >= 500
        default: false
        }
    }

    /// Whether the server says the file is gone (404, 410): the only failure that removes a URL from the saved set.
    package var isGone: Bool { self == .httpStatus(404) || self == .httpStatus(410) }

    /// A 401 or 403 names the three ways to give a login, since "check the URL" would send a user to the wrong
    /// place: a 401 asks for one, and a 403 is also what a server says to a login it does not take (or an
    /// expired signed URL).
    private static func loginAdvice(_ status: Int) -> String {
        let ways = "give a login as user:password@ in the URL (http://user:password@host/path), from ~/.netrc with "
            + "--netrc (or --netrc-file FILE), or as a header with --header 'Authorization: Bearer TOKEN'"
        return status == 401
            ? "HTTP 401 Unauthorized: the server wants a login; \(ways)"
            : "HTTP 403 Forbidden: the server refuses this URL; if it needs a login (or another one), \(ways); "
                + "a signed URL may have expired"
    }

    /// What an object store's error code means for the user, and the fix.
    private static func objectStoreAdvice(_ status: Int, _ code: String, _ bucket: String) -> String {
        let keys = "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile (--s3-profile, AWS_PROFILE) in "
            + "~/.aws/credentials"
        // A GET's error may not name its bucket (the log line names the URL).
        let bucket = bucket.isEmpty ? "of this object" : bucket
        let advice = switch code {
        case "SignatureDoesNotMatch": "the secret key does not match the access key id; \(keys)"
        case "InvalidAccessKeyId": "the store knows no such access key id; \(keys)"
        case "ExpiredToken", "TokenRefreshRequired":
            "the session token has expired; write new credentials into the profile (aws sso login, or "
                + "~/.aws/credentials), which the mount reads again by itself; a key from AWS_SESSION_TOKEN needs "
                + "a new mount"
        case "AccessDenied", "AllAccessDisabled":
            "the key may not read bucket \(bucket); check its permissions, or for a public bucket mount with --s3-no-sign"
        case "NoSuchBucket": "there is no bucket \(bucket) at this endpoint; check the name, --s3-endpoint and --s3-region"
        case "NoSuchKey": "there is no such object in bucket \(bucket); check the key"
        case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
            "bucket \(bucket) is in another region; give it with --s3-region (or AWS_REGION)"
        case "RequestTimeTooSkewed": "this machine's clock is off by more than 15 minutes; set it right"
        case "SlowDown", "ServiceUnavailable": "the store asks to slow down; try again in a while"
        case _ where status >= 500: "the store failed on its side (its fault, not the request's); try again later"
        default: "check the bucket \(bucket), the key and the credentials (\(keys.dropFirst(6)))"
        }
        return "the object store answered HTTP \(status) \(code): \(advice)"
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "error"
        }
    }
}

// A transfer's failure as the cache's waiting readers get it (BlockFailure, Cache's type), and back: FetchError's
// own extension, so that Fetch adds nothing to a type of the layer below it.
extension FetchError {
    /// How a transfer's failure reaches the readers waiting for its blocks.
    var blockFailure: BlockFailure {
        switch self {
        case .remoteChanged: .replaced
        case .cancelled: .cancelled
        default: .failed(self, message: userMessage)
        }
    }

    /// The transfer's error again, for the reader's answer.
    package init(_ failure: BlockFailure) {
        switch failure {
        case .replaced: self = .remoteChanged
        case .cancelled: self = .cancelled
        case .failed(let reason, let message): self = (reason as? FetchError) ?? .transport(message)
        }
    }
}
