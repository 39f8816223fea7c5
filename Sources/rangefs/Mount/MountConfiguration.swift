// The parsed options turned, once, into the settings each layer takes. Nothing else in the executable reads
// `MountOptions` numbers or restates a default.

import FoundationEssentials
import Glibc
import RangeFSCache
import RangeFSFetch
import RangeFSFileSystem
import RangeFSFUSE
import RangeFSHTTP

/// Everything a mount is configured with.
/// More than 12 stored properties: a record, one field per setting the mount's options settle into, made once and read
/// by the mount's composer.
struct MountConfiguration: Equatable {
    /// The cache directory, absolute.
    var cacheRoot: String
    var listFiles: [String]
    var store: StoreSettings
    var fetch: FetchPolicy
    var http: HTTPOptions
    var fileSystem: FileSystemSettings
    var mount: MountSettings
    var foreground: Bool
    /// Whether a mount point holding files may be mounted over (`--nonempty`), hiding them while mounted.
    var nonEmpty = false
    var verbose: Bool
    var logFile: String?
    /// Whether a file's probe's `Link: <URL>; rel=duplicate` headers add mirrors (`--mirrors-from-links`).
    var mirrorsFromLinks = false
    /// The digest of the one URL given (`--checksum sha256=HEX`).
    var checksum: String?
    /// Where `--metrics` serves the counters; nil for nowhere.
    var metrics: MetricsServer.Address?
    /// Header lines for the origins of the given URLs (`--header`, `--cookie`).
    var headers: [String] = []
    /// Where `s3://` and `gs://` sources are, as the options say (resolved with the environment at mount).
    var objectStore = ObjectStoreOptions()

    /// The configuration `options` describe (already validated by parsing).
    init(_ options: MountOptions, environment: [String: String] = ProcessInfo.processInfo.environment) {
        cacheRoot = options.cache.map(MountPoint.absolute) ?? CacheStore.defaultRoot(environment: environment)
        listFiles = options.list
        foreground = options.foreground
        nonEmpty = options.nonempty
        verbose = options.verbose
        logFile = options.logFile

        store = StoreSettings()
        store.commitInterval = .milliseconds(Int((options.commitInterval * 1000).rounded()))
        store.commitBytes = Int(options.commitBytes.bytes)
        store.maxBytes = options.cacheMaxSize.map { Int($0.bytes) }

        fetch = FetchPolicy()
        fetch.attempts = options.retries
        fetch.maxTransfers = options.connections
        fetch.connectionsPerFile = options.connectionsPerFile
        fetch.fillBytesPerSecond = options.bwlimit.map { Int($0.bytes) }
        fetch.maxDownloads = options.maxDownloads

        http = HTTPOptions()
        http.connectTimeout = options.connectTimeout
        http.lowSpeedTime = options.timeout
        http.retryTime = options.retryTime
        http.maxHostConnections = options.connectionsPerHost
        http.userAgent = options.userAgent
        // As the curl tool does: SSL_CERT_FILE (or CURL_CA_BUNDLE) and SSL_CERT_DIR, unless given as options.
        http.caCertificateFile = options.cacert ?? environment["SSL_CERT_FILE"] ?? environment["CURL_CA_BUNDLE"]
        http.caCertificateDirectory = options.capath ?? environment["SSL_CERT_DIR"]
        http.insecure = options.insecure
        http.http2 = options.http2
        http.clientCertificate = options.cert
        http.clientKey = options.key
        http.proxy = options.proxy
        http.noProxy = options.noproxy
        http.proxyResetAfter = options.proxyResetAfter
        mirrorsFromLinks = options.mirrorsFromLinks
        checksum = options.checksum
        metrics = options.metrics.flatMap(MetricsServer.parse)
        http.cookieFile = options.cookieFile
        http.netrcFile = options.netrcFile ?? (options.netrc ? "" : nil)
        headers = options.header + (options.cookie.map { ["Cookie: \($0)"] } ?? [])
        objectStore = ObjectStoreOptions(endpoint: options.s3Endpoint, region: options.s3Region,
                                         pathStyle: options.s3PathStyle, profile: options.s3Profile,
                                         noSign: options.s3NoSign, googleProfile: options.gsProfile)
        // Room for every transfer of both engines' pools, and never fewer than the default.
        http.maxTotalConnections = max(HTTPOptions().maxTotalConnections, options.connections * 2)

        fileSystem = FileSystemSettings(connectionsPerHost: options.connectionsPerHost)
        fileSystem.blockSize = Int(options.blockSize.bytes)
        fileSystem.readaheadMaximum = options.readahead.bytes
        fileSystem.prefetch = options.prefetch
        fileSystem.passthrough = options.passthrough == .auto
        fileSystem.directoryPrefetch = options.dirPrefetch == .on
        fileSystem.archives = options.archives
        fileSystem.revalidateAfter = .milliseconds(Int((options.revalidate * 1000).rounded()))
        fileSystem.directoryCacheTime = .milliseconds(Int((options.dirCacheTime * 1000).rounded()))
        fileSystem.listingTimeout = .milliseconds(Int((options.listingTimeout * 1000).rounded()))

        mount = MountSettings()
        mount.allowOther = options.allowOther
        mount.owner = Owner(uid: options.uid ?? getuid(), gid: options.gid ?? getgid())
        mount.umask = options.umask.flatMap { mode_t($0, radix: 8) } ?? 0
        mount.kernelReadaheadKiB = options.kernelReadahead > 0 ? options.kernelReadahead : nil
        mount.passthrough = fileSystem.passthrough
    }
}
