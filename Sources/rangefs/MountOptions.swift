import ArgumentParser
import RangeFSCore

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

    @Option(name: .long, help: "Write logs here once the mount runs in the background.")
    var logFile: String?

    @Flag(name: [.short, .long], help: "Log each request.")
    var verbose = false

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
                case ("foreground", nil), ("f", nil): foreground = true
                case ("allow_other", nil): allowOther = true
                case ("verbose", nil): verbose = true
                default:
                    if Self.ignoredMountOptions.contains(parts[0]) || parts[0].hasPrefix("x-") { continue }
                    throw ValidationError("unknown mount option '\(option)'; see rangefs mount --help for the options")
                }
            }
        }
    }

    /// The block size in bytes, validated.
    func blockSizeBytes() throws -> Int {
        guard let bytes = ByteSize.parse(blockSize), bytes >= 4096, bytes <= 64 << 20, bytes % 4096 == 0 else {
            throw ValidationError("invalid --block-size '\(blockSize)'; use a multiple of 4K between 4K and 64M, e.g. 64K")
        }
        return Int(bytes)
    }
}
