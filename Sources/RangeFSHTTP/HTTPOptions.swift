/// Network settings for every transfer. Timeouts are always set, so no request can hang forever.
/// More than 12 stored properties: a record, one field per network option of the command line; each is read where its
/// libcurl option is set, and nothing else is kept.
public struct HTTPOptions: Sendable, Equatable {
    /// Seconds to establish a connection (TCP and TLS).
    public var connectTimeout = 10
    /// A transfer slower than `lowSpeedLimit` bytes/s for `lowSpeedTime` seconds is aborted and retried.
    public var lowSpeedLimit = 1024
    public var lowSpeedTime = 20
    public var maxRedirects = 10
    /// Seconds an answer that says "not now" (503, S3's SlowDown, 429) is asked again for, with growing pauses or
    /// as its Retry-After says, before the request fails (ThrottleRetry.swift); 0 asks once.
    public var retryTime = 45
    /// Connections to one host at once, and in total.
    public var maxHostConnections = 16
    public var maxTotalConnections = 64
    public var userAgent = "rangefs/0.1"
    /// Ask for HTTP/2 where a TLS server offers it: one connection per host, the transfers multiplexed on it. Off by
    /// default, so parallel transfers use parallel HTTP/1.1 connections: in the benchmark (nginx over TLS on
    /// 127.0.0.1, 8 paired runs) HTTP/2 ran at a median 0.99x for a cold cp and 0.97x for the fill.
    public var http2 = false

    /// TLS: CA certificates to trust instead of the system's (a file, a hashed directory), no verification at all,
    /// and a client certificate and its key.
    public var caCertificateFile: String?
    public var caCertificateDirectory: String?
    public var insecure = false
    public var clientCertificate: String?
    public var clientKey: String?

    /// A proxy for every request (else libcurl reads http_proxy, https_proxy, all_proxy), and the hosts that skip
    /// it (else no_proxy).
    public var proxy: String?
    public var noProxy: String?
    /// With proxy groups in `proxy`: seconds after a failover before the first group is used again.
    public var proxyResetAfter = 300

    /// Cookies in the Netscape format, sent to the hosts they name; and a .netrc to take logins from (nil: none;
    /// an empty path: ~/.netrc).
    public var cookieFile: String?
    public var netrcFile: String?

    public init() {}
}
