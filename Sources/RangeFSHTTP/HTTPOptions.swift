/// Network settings for every transfer. Timeouts are always set, so no request can hang forever.
public struct HTTPOptions: Sendable, Equatable {
    /// Seconds to establish a connection (TCP and TLS).
    public var connectTimeout = 10
    /// A transfer slower than `lowSpeedLimit` bytes/s for `lowSpeedTime` seconds is aborted and retried.
    public var lowSpeedLimit = 1024
    public var lowSpeedTime = 20
    public var maxRedirects = 10
    /// Connections to one host at once, and in total.
    public var maxHostConnections = 16
    public var maxTotalConnections = 64
    public var userAgent = "rangefs/0.1"

    public init() {}
}
