// `-o opt,opt=value,...`, as mount(8) and fstab pass options. Every rangefs option can be written this way, with
// `_` for `-` (`block_size=64K` is `--block-size 64K`): before parsing, each `-o` list is rewritten into the long
// options, so parsing, defaults and validation are those of `MountOptions`. What is special to `-o` is data here:
// the flags, an alias, the generic mount options that are accepted and ignored, and one that is always on.

import ArgumentParser

enum MountOptionList {
    /// Options that take no value.
    static let flags: Set<String> = ["foreground", "allow_other", "verbose", "insecure", "netrc", "http2",
                                     "mirrors_from_links", "s3_path_style", "s3_no_sign", "nonempty", "archives"]
    /// Options that take a value: every other long option of `MountOptions`.
    static let valued: Set<String> = [
        "cache", "list", "block_size", "uid", "gid", "umask", "log_file", "commit_interval", "commit_bytes",
        "readahead", "prefetch", "passthrough", "dir_prefetch", "bwlimit", "cache_max_size", "max_downloads",
        "connections", "connections_per_file", "connections_per_host", "kernel_readahead", "revalidate", "dir_cache_time", "listing_timeout", "connect_timeout", "timeout",
        "retries", "retry_time", "cacert", "capath", "cert", "key", "header", "cookie", "cookie_file", "netrc_file", "user_agent",
        "proxy", "noproxy", "proxy_reset_after", "metrics", "checksum", "s3_endpoint", "s3_region", "s3_profile",
        "gs_profile",
    ]
    static let aliases = ["f": "foreground"]
    /// Always on: the kernel checks the mode bits.
    static let alwaysOn: Set<String> = ["default_permissions"]
    /// Mount options that mount(8) and fstab pass along but that mean nothing to rangefs; `x-*` too.
    static let ignored: Set<String> = [
        "auto", "noauto", "user", "users", "nouser", "_netdev", "nofail", "rw", "ro", "dev", "nodev", "suid",
        "nosuid", "exec", "noexec", "defaults", "atime", "noatime", "relatime", "async", "sync",
    ]

    /// `arguments` with every `-o LIST` (or `-oLIST`) replaced by the long options it stands for.
    static func expand(_ arguments: [String]) throws -> [String] {
        var expanded: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                expanded += arguments[(index - 1)...]
                break
            }
            guard argument.hasPrefix("-o") else {
                expanded.append(argument)
                continue
            }
            var list = String(argument.dropFirst(2))
            if list.isEmpty {
                guard index < arguments.endIndex else { throw ValidationError("-o needs a list of options, e.g. -o cache=/var/cache/rangefs") }
                list = arguments[index]
                index += 1
            }
            expanded += try longOptions(list)
        }
        return expanded
    }

    /// The long options one `-o` list stands for; an unknown option is an error that names it.
    static func longOptions(_ list: String) throws -> [String] {
        var options: [String] = []
        for option in list.split(separator: ",").map(String.init) where !option.isEmpty {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts[0].replacing("-", with: "_")
            let name = aliases[key] ?? key
            let flag = "--" + name.replacing("_", with: "-")
            if parts.count == 1, flags.contains(name) {
                options.append(flag)
            } else if parts.count == 2, valued.contains(name) {
                options.append(flag + "=" + parts[1])
            } else if flags.contains(name) || valued.contains(name) {
                let shape = flags.contains(name) ? "takes no value: -o \(name)" : "needs a value, e.g. -o \(name)=..."
                throw ValidationError("mount option '\(option)' \(shape)")
            } else if !(alwaysOn.contains(key) || ignored.contains(parts[0]) || parts[0].hasPrefix("x-")) {
                throw ValidationError("unknown mount option '\(option)'; see rangefs mount --help for the options")
            }
        }
        return options
    }
}
