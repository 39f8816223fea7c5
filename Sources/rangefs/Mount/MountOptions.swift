// The options of `rangefs mount` and the fstab shape. Each default is stated once: it is read from the settings
// type of the layer that uses it (StoreSettings, FetchPolicy, FileSystemSettings, HTTPOptions, MountSettings), and
// shown in --help from there. `MountConfiguration` turns the parsed options into those settings, once.

import ArgumentParser
import FoundationEssentials
import Glibc
import RangeFSCache
import RangeFSFetch
import RangeFSFileSystem
import RangeFSFUSE
import RangeFSHTTP

extension PrefetchPolicy: ExpressibleByArgument {}

/// `--passthrough`: whether complete files are read by the kernel itself (FUSE passthrough).
enum PassthroughChoice: String, ExpressibleByArgument, CaseIterable, Equatable {
    /// When the kernel offers it and the daemon may use it (root).
    case auto
    case off
}

/// `--dir-prefetch`: whether the next files of a directory read in listing order are fetched ahead.
enum DirectoryPrefetchChoice: String, ExpressibleByArgument, CaseIterable, Equatable {
    case on
    case off
}

/// A `--header` value: `Name: value`, one line.
enum HeaderLine {
    /// What is wrong with `line`, or nil.
    static func problem(_ line: String) -> String? {
        guard let colon = line.firstIndex(of: ":") else { return "no ':' between name and value" }
        let name = line[..<colon]
        if name.isEmpty { return "no header name before ':'" }
        let token = "!#$%&'*+-.^_`|~"
        if !name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || token.unicodeScalars.contains($0) }) {
            return "the name '\(name)' holds a character a header name cannot"
        }
        if line.contains(where: { $0 == "\r" || $0 == "\n" }) { return "it holds a line break" }
        return nil
    }

    /// The line as an error may show it: the name only, never the value (it may be a token).
    static func shown(_ line: String) -> String {
        guard let colon = line.firstIndex(of: ":") else { return String(line.prefix(4)) + "…" }
        return line[...colon] + " …"
    }
}

/// The defaults of every layer, in one place for the options below.
enum Defaults {
    static let store = StoreSettings()
    static let fetch = FetchPolicy()
    static let fileSystem = FileSystemSettings()
    static let http = {
        var options = HTTPOptions()
        options.userAgent = "rangefs/\(rangefsVersion)"
        return options
    }()
    static let mount = MountSettings()
}

/// Options shared by `rangefs mount` and the fstab shape. `-o key=value,...` is turned into these long options
/// before parsing (see `MountOptionList`).
/// More than 12 stored properties: ArgumentParser's shape: one property per option of `rangefs mount` and of its fstab
/// form.
struct MountOptions: ParsableArguments {
    @Option(name: .long, help: "Cache directory (default: $XDG_CACHE_HOME/rangefs or ~/.cache/rangefs).", completion: .directory)
    var cache: String?

    @Option(name: .long, help: "A file with one URL or NAME=URL per line; # starts a comment.", completion: .file())
    var list: [String] = []

    @Option(name: .long, help: "Block size for new cache entries, e.g. 64K or 1M (a multiple of 4K).")
    var blockSize = ByteCount(Defaults.fileSystem.blockSize)

    @Flag(name: [.short, .long], help: "Stay in the foreground; Ctrl-C or SIGTERM unmounts.")
    var foreground = false

    @Flag(name: .long, help: "Mount even on a directory that holds files; they are hidden while mounted.")
    var nonempty = false

    @Flag(name: .long, help: "Let other users see the files (needs user_allow_other in /etc/fuse.conf).")
    var allowOther = Defaults.mount.allowOther

    @Option(name: .long, help: "The owner (user id) the files appear to have (default: who mounts).")
    var uid: UInt32?

    @Option(name: .long, help: "The group id the files appear to have (default: who mounts).")
    var gid: UInt32?

    @Option(name: .long, help: "Permission bits to clear, in octal, e.g. 027 (default: none; files are 0444).")
    var umask: String?

    @Option(name: .long, help: "Write logs here once the mount runs in the background (default: syslog).", completion: .file())
    var logFile: String?

    @Flag(name: [.short, .long], help: "Log each request.")
    var verbose = false

    @Option(name: .long, help: "Seconds between cache commits: at most this much download progress is lost in a crash.")
    var commitInterval = Defaults.store.commitInterval.seconds

    @Option(name: .long, help: "Also commit once this much was fetched since the last commit, e.g. 64M.")
    var commitBytes = ByteCount(Defaults.store.commitBytes)

    @Option(name: .long, help: "The largest readahead window of a sequential reader, e.g. 32M.")
    var readahead = ByteCount(Defaults.fileSystem.readaheadMaximum)

    @Option(name: .long, help: "Complete files in the background: use (each file a reader uses: 16 MiB read through one handle, more than a probe reads), open (each file once opened), all, or none.")
    var prefetch = Defaults.fileSystem.prefetch

    @Option(name: .long, help: "Read complete files in the kernel, past the daemon (FUSE passthrough): auto (when the kernel offers it and the mount runs as root) or off.")
    var passthrough = Defaults.fileSystem.passthrough ? PassthroughChoice.auto : .off

    @Option(name: .long, help: "Fetch the next files of a directory ahead of a reader that opens its files in listing order (cp -r, tar, rsync): on or off.")
    var dirPrefetch = Defaults.fileSystem.directoryPrefetch ? DirectoryPrefetchChoice.on : .off

    @Flag(name: .long, help: "Show files named .zip, .tar, .tar.gz, .tgz or .iso as folders of their members, read by range through the cache.")
    var archives = Defaults.fileSystem.archives

    @Option(name: .long, help: "Cap background completion at this rate in bytes/s, e.g. 10M; readers are never capped.")
    var bwlimit: ByteCount?

    @Option(name: .long, help: "Keep the cached data of the mounted files under this size, e.g. 10G (least recently used blocks go first; pinned files stay).")
    var cacheMaxSize: ByteCount?

    @Option(name: .long, help: "Files completed in the background at once.")
    var maxDownloads: Int?

    @Option(name: .long, help: "Readahead and background transfers at once, over all files.")
    var connections = Defaults.fetch.maxTransfers

    @Option(name: .long, help: "Readahead and background transfers at once for one file.")
    var connectionsPerFile = Defaults.fetch.connectionsPerFile

    @Option(name: .long, help: "Connections to one server at once.")
    var connectionsPerHost = Defaults.http.maxHostConnections

    @Option(name: .long, help: "The kernel's readahead for the mount in KiB (needs root); 0 keeps the default.")
    var kernelReadahead = Defaults.mount.kernelReadaheadKiB ?? 0

    @Option(name: .long, help: "On open, check the server for a newer version when the last check is older than this many seconds (in the background); 0 checks at every open.")
    var revalidate = Defaults.fileSystem.revalidateAfter?.seconds ?? 0

    @Option(name: .long, help: "A directory visited again this many seconds after its listing was read is listed again in the background (new files appear, removed ones go).")
    var dirCacheTime = Defaults.fileSystem.directoryCacheTime.seconds

    @Option(name: .long, help: "Seconds a directory listing may take from its request to its last byte; a server that sends it slower, or without end, fails it (and a mount of that directory) with a message.")
    var listingTimeout = Defaults.fileSystem.listingTimeout.seconds

    @Option(name: .long, help: "Seconds to wait for a connection to the server.")
    var connectTimeout = Defaults.http.connectTimeout

    @Option(name: .long, help: "Seconds a transfer may make no progress before it is retried; a read fails with EIO after the retries.")
    var timeout = Defaults.http.lowSpeedTime

    @Option(name: .long, help: "Attempts per request when the network fails (each resumes where the last broke).")
    var retries = Defaults.fetch.attempts

    @Option(name: .long, help: "Seconds a server answering 503 (SlowDown) or 429 is asked again for, with growing pauses or as its Retry-After says, before a request fails; 0 asks once.")
    var retryTime = Defaults.http.retryTime

    @Option(name: .long, help: "Trust the CA certificates in this PEM file (default: the system's, or $SSL_CERT_FILE).", completion: .file())
    var cacert: String?

    @Option(name: .long, help: "Trust the CA certificates in this hashed directory (default: $SSL_CERT_DIR).", completion: .directory)
    var capath: String?

    @Flag(name: .long, help: "Do not verify the servers' TLS certificates (anyone on the path can change the data).")
    var insecure = false

    @Flag(name: .long, help: "Use HTTP/2 where a TLS server offers it: one connection per host instead of several HTTP/1.1 ones.")
    var http2 = false

    @Option(name: .long, help: "A client certificate (PEM) for servers that ask for one.", completion: .file())
    var cert: String?

    @Option(name: .long, help: "The key of --cert (PEM), if it is not in the same file.", completion: .file())
    var key: String?

    @Option(name: .long, help: "Send this header, 'Name: value', to the servers of the given URLs (repeatable); kept for remounts in the cache's credentials.json (0600).")
    var header: [String] = []

    @Option(name: .long, help: "Send these cookies, 'name=value; name2=value2', to the servers of the given URLs (kept like --header).")
    var cookie: String?

    @Option(name: .long, help: "Send the cookies of this file (Netscape format, as curl and browsers export) to the hosts it names.", completion: .file())
    var cookieFile: String?

    @Flag(name: .long, help: "Take logins from ~/.netrc.")
    var netrc = false

    @Option(name: .long, help: "Take logins from this .netrc file.", completion: .file())
    var netrcFile: String?

    @Option(name: .long, help: "The User-Agent header.")
    var userAgent = Defaults.http.userAgent

    @Option(name: .long, help: "Reach every server through this proxy, e.g. http://proxy:3128, or through groups of proxies: 'http://p1:3128|http://p2:3128;http://p3:3128' ('|' shares the load within a group, ';' fails over to the next group, DIRECT is no proxy) (default: $http_proxy, $https_proxy).")
    var proxy: String?

    @Option(name: .long, help: "With proxy groups: seconds after a failover before the first group is used again.")
    var proxyResetAfter = Defaults.http.proxyResetAfter

    @Flag(name: .long, help: "Also fetch each file from the URLs its server names in 'Link: <URL>; rel=duplicate' headers (RFC 6249).")
    var mirrorsFromLinks = false

    @Option(name: .long, help: "The digest of the one URL given, as sha256=HEX (or sha512=HEX): the file is checked against it once complete. In a list file, put sha256=HEX after the URL instead.")
    var checksum: String?

    @Option(name: .long, help: "Serve the mount's counters in the Prometheus text format at http://ADDR:PORT/metrics; ADDR defaults to 127.0.0.1 (e.g. --metrics 9464).")
    var metrics: String?

    @Option(name: .long, help: "Hosts reached without the proxy, comma-separated; * for all (default: $no_proxy).")
    var noproxy: String?

    @Option(name: .long, help: "The object store s3:// sources are on, e.g. http://127.0.0.1:9000 for MinIO (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS).")
    var s3Endpoint: String?

    @Option(name: .long, help: "The region s3:// requests are signed for (default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's region, else us-east-1).")
    var s3Region: String?

    @Flag(name: .long, help: "Address buckets as https://ENDPOINT/BUCKET/KEY (the default with --s3-endpoint; AWS itself gets https://BUCKET.s3.REGION.amazonaws.com/KEY).")
    var s3PathStyle = false

    @Option(name: .long, help: "Take the s3:// key from this profile of ~/.aws/credentials and ~/.aws/config (default: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, else $AWS_PROFILE, else default).")
    var s3Profile: String?

    @Flag(name: .long, help: "Send s3:// requests unsigned, for public buckets (the default when no key is found).")
    var s3NoSign = false

    @Option(name: .long, help: "Sign gs:// requests with the key of this profile of ~/.aws/credentials and ~/.aws/config: an HMAC key Google Cloud Storage made for its S3-compatible API (default: gs:// goes unsigned, for public buckets; an AWS key is never sent to Google).")
    var gsProfile: String?

    /// Checks ranges; each error names the option and a valid value.
    func validate() throws {
        for line in header {
            if let problem = HeaderLine.problem(line) {
                throw ValidationError("invalid --header '\(HeaderLine.shown(line))': \(problem); write it as 'Name: value', e.g. --header 'Authorization: Bearer TOKEN'")
            }
        }
        if let cookie, cookie.contains(where: { $0 == "\r" || $0 == "\n" }) || !cookie.contains("=") {
            throw ValidationError("invalid --cookie: write it as 'name=value', several separated by '; '")
        }
        for (option, path) in [("--cacert", cacert), ("--capath", capath), ("--cert", cert), ("--key", key),
                               ("--cookie-file", cookieFile), ("--netrc-file", netrcFile)] {
            if let path, access(path, R_OK) != 0 {
                throw ValidationError("cannot read \(option) \(path) (\(String(cString: strerror(errno)))); check the path")
            }
        }
        if let proxy {
            do {
                _ = try ProxyChain(parsing: proxy)
            } catch {
                throw ValidationError(error.message)
            }
        }
        if let metrics, MetricsServer.parse(metrics) == nil {
            throw ValidationError("invalid --metrics '\(metrics)'; give ADDR:PORT or PORT, e.g. --metrics 127.0.0.1:9464")
        }
        guard proxyResetAfter >= 1 else { throw ValidationError("--proxy-reset-after must be at least 1 second") }
        if key != nil && cert == nil { throw ValidationError("--key needs --cert (the client certificate it belongs to)") }
        guard commitInterval >= 0.01 && commitInterval <= 60 else {
            throw ValidationError("--commit-interval \(commitInterval) is out of range; use 0.01 to 60 seconds, e.g. 0.5")
        }
        guard connectTimeout >= 1, timeout >= 1 else {
            throw ValidationError("--connect-timeout and --timeout must be at least 1 second")
        }
        guard retries >= 1 && retries <= 100 else { throw ValidationError("--retries must be 1 to 100") }
        guard retryTime >= 0 && retryTime <= 3600 else { throw ValidationError("--retry-time must be 0 to 3600 seconds") }
        guard revalidate >= 0 else { throw ValidationError("--revalidate must be 0 or more seconds") }
        guard dirCacheTime >= 0 else { throw ValidationError("--dir-cache-time must be 0 or more seconds") }
        guard listingTimeout >= 1 else {
            throw ValidationError("--listing-timeout \(listingTimeout) is too short; give at least 1 second, e.g. 600")
        }
        guard kernelReadahead >= 0 else { throw ValidationError("--kernel-readahead must be 0 or more KiB") }
        let block = blockSize.bytes
        guard block >= 4096, block <= 64 << 20, block % 4096 == 0 else {
            throw ValidationError("invalid --block-size '\(blockSize)'; use a multiple of 4K between 4K and 64M, e.g. 64K")
        }
        guard commitBytes.bytes >= 64 << 10 else {
            throw ValidationError("invalid --commit-bytes '\(commitBytes)'; use a size of at least 64K, e.g. 16M")
        }
        guard readahead.bytes >= 1 << 20 else {
            throw ValidationError("invalid --readahead '\(readahead)'; use a size of at least 1M, e.g. 32M")
        }
        if let bwlimit, bwlimit.bytes < 1024 {
            throw ValidationError("invalid --bwlimit '\(bwlimit)'; use bytes per second of at least 1K, e.g. 10M")
        }
        if let cacheMaxSize, cacheMaxSize.bytes < 1 << 20 {
            throw ValidationError("invalid --cache-max-size '\(cacheMaxSize)'; use a size of at least 1M, e.g. 10G")
        }
        if let maxDownloads, maxDownloads < 1 { throw ValidationError("--max-downloads must be at least 1") }
        if let umask, mode_t(umask, radix: 8).map({ $0 > 0o777 }) ?? true {
            throw ValidationError("invalid umask '\(umask)'; give octal permission bits, e.g. umask=027")
        }
        for (name, value) in [("--connections", connections), ("--connections-per-file", connectionsPerFile),
                              ("--connections-per-host", connectionsPerHost)] where value < 1 || value > 256 {
            throw ValidationError("\(name) \(value) is out of range; use 1 to 256")
        }
    }
}
