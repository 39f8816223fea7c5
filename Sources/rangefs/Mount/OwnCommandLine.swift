// The command line of this very process, as `ps` and /proc/PID/cmdline show it to every user. The background child
// gets its real arguments over a pipe, so its argv is masked from the start; but a mount in the foreground (`-f`,
// a systemd unit, a container's entry point) is the daemon itself, and the mounting parent lives for as long as the
// probes take. Linux reads /proc/PID/cmdline from the process's own memory (between arg_start and arg_end), so
// overwriting the strings argv points to changes what others see: each argument holding a secret is rewritten in
// place with the masked form, padded with NULs. Swift's `CommandLine.arguments` is a copy made on first use, so
// it must be read before (main does), and keeps the real arguments for this process.

import Glibc

enum OwnCommandLine {
    /// Rewrites this process's argv in place as `Daemon.maskingSecrets` masks it. Call it after
    /// `CommandLine.arguments` was read.
    static func maskSecrets() {
        let arguments = CommandLine.arguments
        for (index, masked) in Daemon.maskingSecrets(arguments).enumerated() where masked != arguments[index] {
            guard index < Int(CommandLine.argc), let pointer = CommandLine.unsafeArgv[index] else { continue }
            let length = strlen(pointer)
            var bytes = Array(masked.utf8)
            // Never longer than the original: a value shorter than the mark becomes as many `*`.
            if bytes.count > length { bytes = Array(repeating: UInt8(ascii: "*"), count: length) }
            // SAFETY: argv[index] holds `length` bytes and a NUL, written at exec; only `length` bytes are written,
            // the NUL stays, and nothing reads argv again (CommandLine.arguments copied it before).
            let target = UnsafeMutableRawPointer(pointer)
            bytes.withUnsafeBytes { target.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            memset(target + bytes.count, 0, length - bytes.count)
        }
    }
}
