import ArgumentParser
import Glibc
import RangeFSCore

extension PrefetchPolicy: ExpressibleByArgument {}

/// Options shared by `rangefs mount` and the fstab shape.
struct MountOptions: ParsableArguments {
    @Option(name: .long, help: "Cache directory (default: $XDG_CACHE_HOME/rangefs or ~/.cache/rangefs).")
    var cache: String?

    @Option(name: .long, help: "A file with one URL or NAME=URL per line; # starts a comment.")
    var list: [String] = []

    @Option(name: .long, help: "Block size for new cache entries, e.g. 64K or 1M (a multiple of 4K).")
    var blockSize: String = "64K"

    @Flag(name: [.short, .long], help: "Stay in the foreground; Ctrl-C or SIGTERM unmounts.")
    var foreground = false

    @Flag(name: .long, help: "Let other users see the files (needs user_allow_other in /etc/fuse.conf).")
    var allowOther = false

    @Option(name: .long, help: "The owner (user id) the files appear to have (default: who mounts).")
    var uid: UInt32?

    @Option(name: .long, help: "The group id the files appear to have (default: who mounts).")
    var gid: UInt32?

    @Option(name: .long, help: "Permission bits to clear, in octal, e.g. 027 (default: 022-like 0444 files).")
    var umask: String?

    @Option(name: .long, help: "Write logs here once the mount runs in the background (default: syslog).")
    var logFile: String?

    @Flag(name: [.short, .long], help: "Log each request.")
    var verbose = false

    @Option(name: .long, help: "Seconds between cache commits: at most this much download progress is lost in a crash.")
    var commitInterval: Double = 0.5

    @Option(name: .long, help: "Also commit once this much was fetched since the last commit, e.g. 64M.")
    var commitBytes: String = "1G"

    @Option(name: .long, help: "The largest readahead window of a sequential reader, e.g. 32M.")
    var readahead: String = "32M"

    @Option(name: .long, help: "Complete files in the background: open (each file once opened), all, or none.")
    var prefetch: PrefetchPolicy = .open

    @Option(name: .long, help: "Cap background completion at this rate in bytes/s, e.g. 10M; readers are never capped.")
    var bwlimit: String?

    @Option(name: .long, help: "Keep the cached data of the mounted files under this size, e.g. 10G (least recently used blocks go first; pinned files stay).")
    var cacheMaxSize: String?

    @Option(name: .long, help: "Files completed in the background at once.")
    var maxDownloads: Int?

    @Option(name: .long, help: "Readahead and background transfers at once, over all files.")
    var connections: Int = 16

    @Option(name: .long, help: "Readahead and background transfers at once for one file.")
    var connectionsPerFile: Int = 8

    @Option(name: .long, help: "Connections to one server at once.")
    var connectionsPerHost: Int = 16

    @Option(name: .long, help: "The kernel's readahead for the mount in KiB (needs root); 0 keeps the default.")
    var kernelReadahead: Int = 1024

    @Option(name: .long, help: "On open, check the server for a newer version when the last check is older than this many seconds (in the background); 0 checks at every open.")
    var revalidate: Double = 60

    @Option(name: .long, help: "Seconds to wait for a connection to the server.")
    var connectTimeout: Int = 10

    @Option(name: .long, help: "Seconds a transfer may make no progress before it is retried; a read fails with EIO after the retries.")
    var timeout: Int = 20

    @Option(name: .long, help: "Attempts per request when the network fails (each resumes where the last broke).")
    var retries: Int = 4

    @Option(name: .short, help: "Mount options, comma-separated: cache=DIR, list=FILE, block_size=N, foreground, allow_other, log_file=FILE.")
    var o: [String] = []

    /// Mount options that mount(8) and fstab pass along but that mean nothing to rangefs.
    static let ignoredMountOptions: Set<String> = [
        "auto", "noauto", "user", "users", "nouser", "_netdev", "nofail", "rw", "ro", "dev", "nodev", "suid",
        "nosuid", "exec", "noexec", "defaults", "atime", "noatime", "relatime", "async", "sync",
    ]

    /// Folds `-o key=value,...` into the long options; an unknown option is an error that names it.
    mutating func applyMountOptions() throws {
        for group in o {
            for option in group.split(separator: ",").map(String.init) where !option.isEmpty {
                let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
                let key = parts[0].replacingOccurrences(of: "-", with: "_")
                let value = parts.count > 1 ? parts[1] : nil
                switch (key, value) {
                case ("cache", let value?): cache = value
                case ("list", let value?): list.append(value)
                case ("block_size", let value?): blockSize = value
                case ("log_file", let value?): logFile = value
                case ("commit_interval", let value?): commitInterval = try number(value, option)
                case ("commit_bytes", let value?): commitBytes = value
                case ("prefetch", let value?):
                    guard let policy = PrefetchPolicy(rawValue: value) else {
                        throw ValidationError("mount option '\(option)': prefetch is open, all or none")
                    }
                    prefetch = policy
                case ("bwlimit", let value?): bwlimit = value
                case ("cache_max_size", let value?): cacheMaxSize = value
                case ("max_downloads", let value?): maxDownloads = Int(try number(value, option))
                case ("revalidate", let value?): revalidate = try number(value, option)
                case ("connections", let value?): connections = Int(try number(value, option))
                case ("connections_per_file", let value?): connectionsPerFile = Int(try number(value, option))
                case ("connections_per_host", let value?): connectionsPerHost = Int(try number(value, option))
                case ("kernel_readahead", let value?): kernelReadahead = Int(try number(value, option))
                case ("readahead", let value?): readahead = value
                case ("connect_timeout", let value?): connectTimeout = Int(try number(value, option))
                case ("timeout", let value?): timeout = Int(try number(value, option))
                case ("retries", let value?): retries = Int(try number(value, option))
                case ("foreground", nil), ("f", nil): foreground = true
                case ("allow_other", nil): allowOther = true
                case ("default_permissions", nil): continue  // always on: the kernel checks the mode bits
                case ("uid", let value?): uid = UInt32(try number(value, option))
                case ("gid", let value?): gid = UInt32(try number(value, option))
                case ("umask", let value?): umask = value
                case ("verbose", nil): verbose = true
                default:
                    if Self.ignoredMountOptions.contains(parts[0]) || parts[0].hasPrefix("x-") { continue }
                    throw ValidationError("unknown mount option '\(option)'; see rangefs mount --help for the options")
                }
            }
        }
    }

    private func number(_ text: String, _ option: String) throws -> Double {
        guard let value = Double(text), value >= 0 else {
            throw ValidationError("mount option '\(option)' needs a number, e.g. \(option.split(separator: "=")[0])=5")
        }
        return value
    }

    /// Checks the numeric options; the error names the option and a valid value.
    func validateNumbers() throws {
        guard commitInterval >= 0.01 && commitInterval <= 60 else {
            throw ValidationError("--commit-interval \(commitInterval) is out of range; use 0.01 to 60 seconds, e.g. 0.5")
        }
        guard connectTimeout >= 1, timeout >= 1 else {
            throw ValidationError("--connect-timeout and --timeout must be at least 1 second")
        }
        guard retries >= 1 && retries <= 100 else { throw ValidationError("--retries must be 1 to 100") }
        _ = try commitByteCount()
        _ = try readaheadBytes()
        _ = try bandwidthLimit()
        _ = try cacheSizeLimit()
        if let maxDownloads, maxDownloads < 1 { throw ValidationError("--max-downloads must be at least 1") }
        if let umask, mode_t(umask, radix: 8).map({ $0 > 0o777 }) ?? true {
            throw ValidationError("invalid umask '\(umask)'; give octal permission bits, e.g. umask=027")
        }
        for (name, value) in [("--connections", connections), ("--connections-per-file", connectionsPerFile),
                              ("--connections-per-host", connectionsPerHost)] where value < 1 || value > 256 {
            throw ValidationError("\(name) \(value) is out of range; use 1 to 256")
        }
    }

    /// The umask as a number (octal text), or 0.
    func umaskValue() -> mode_t {
        umask.flatMap { mode_t($0, radix: 8) } ?? 0
    }

    /// The cache size cap in bytes, or nil.
    func cacheSizeLimit() throws -> Int? {
        guard let cacheMaxSize else { return nil }
        guard let bytes = ByteSize.parse(cacheMaxSize), bytes >= 1 << 20 else {
            throw ValidationError("invalid --cache-max-size '\(cacheMaxSize)'; use a size of at least 1M, e.g. 10G")
        }
        return Int(bytes)
    }

    /// The background bandwidth cap in bytes per second, or nil.
    func bandwidthLimit() throws -> Int? {
        guard let bwlimit else { return nil }
        guard let bytes = ByteSize.parse(bwlimit), bytes >= 1024 else {
            throw ValidationError("invalid --bwlimit '\(bwlimit)'; use bytes per second of at least 1K, e.g. 10M")
        }
        return Int(bytes)
    }

    func commitByteCount() throws -> Int {
        guard let bytes = ByteSize.parse(commitBytes), bytes >= 64 << 10 else {
            throw ValidationError("invalid --commit-bytes '\(commitBytes)'; use a size of at least 64K, e.g. 16M")
        }
        return Int(bytes)
    }

    func readaheadBytes() throws -> UInt64 {
        guard let bytes = ByteSize.parse(readahead), bytes >= 1 << 20 else {
            throw ValidationError("invalid --readahead '\(readahead)'; use a size of at least 1M, e.g. 32M")
        }
        return bytes
    }

    /// The block size in bytes, validated.
    func blockSizeBytes() throws -> Int {
        guard let bytes = ByteSize.parse(blockSize), bytes >= 4096, bytes <= 64 << 20, bytes % 4096 == 0 else {
            throw ValidationError("invalid --block-size '\(blockSize)'; use a multiple of 4K between 4K and 64M, e.g. 64K")
        }
        return Int(bytes)
    }
}
