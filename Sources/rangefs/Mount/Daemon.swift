import FoundationEssentials
import Glibc
import RangeFSProcess
import RangeFSSystem

/// Going to the background the safe way for a threaded program: no fork, but a fresh copy of this program in
/// the foreground, in its own session, whose stderr is a pipe the parent reads until the readiness line.
///
/// The child's command line shows the arguments with their secrets masked (for `ps`); the real ones come on its
/// standard input, a pipe, so no password or token is ever in its argv or environment.
enum Daemon {
    /// Starts the background child and waits until it is mounted or has failed; returns the exit status. A stop
    /// (Ctrl-C, SIGTERM, SIGHUP) while it waits goes on to the child, which is in a session of its own and would
    /// not hear it, so that a mount that is not up yet stops as a whole (`StopForwarder`).
    static func spawnAndWait() -> Int32 {
        let forwarder = StopForwarder()
        defer { forwarder.cancel() }
        var environment = ProcessInfo.processInfo.environment
        environment[daemonChildVariable] = "1"
        let pid: pid_t
        let readEnd: Int32
        do {
            let pipe = try Subprocess.pipe()
            let arguments = try Subprocess.pipe()
            readEnd = pipe.read
            defer { close(pipe.write) }
            do {
                defer { close(arguments.read) }
                pid = try Subprocess.spawn("/proc/self/exe", arguments: maskingSecrets(CommandLine.arguments),
                                           environment: environment, input: .descriptor(arguments.read),
                                           output: .null, error: .descriptor(pipe.write), newSession: true)
            }
            forwarder.forward(to: pid)
            // NUL-terminated arguments; a child that died early makes this fail with EPIPE (SIGPIPE is ignored).
            signal(SIGPIPE, SIG_IGN)
            var bytes: [UInt8] = []
            for argument in CommandLine.arguments.dropFirst() { bytes += Array(argument.utf8) + [0] }
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = Glibc.write(arguments.write, raw.baseAddress! + offset, raw.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
            close(arguments.write)
        } catch {
            printError("rangefs: cannot start the background process: \(error)")
            return MountRunner.Status.failed
        }

        defer { close(readEnd) }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(readEnd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending += chunk[..<count]
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if line.hasPrefix(readinessMarker) {
                    return Int32(line.dropFirst(readinessMarker.count)) ?? MountRunner.Status.failed
                }
                printError(line)
            }
        }
        // The child exited before it was ready: its status says why.
        let status = Subprocess.wait(for: pid)
        return status < 128 ? max(status, MountRunner.Status.failed) : MountRunner.Status.failed
    }

    /// In the child: the arguments the parent sent on standard input (without argv[0]), then standard input is
    /// /dev/null. Nil if there were none.
    static func receiveArguments() -> [String]? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if null >= 0 {
            dup2(null, 0)
            close(null)
        }
        guard bytes.last == 0 else { return nil }
        return bytes.dropLast().split(separator: 0, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// `arguments` as `ps` may show them: URLs (each proxy of a `--proxy` chain too) without their
    /// `user:password@`, and the values of --header, --cookie and -o lists that hold either replaced by `***`.
    static func maskingSecrets(_ arguments: [String]) -> [String] {
        var masked: [String] = []
        var hideNext = false
        var proxyNext = false
        for argument in arguments {
            defer {
                hideNext = ["--header", "--cookie"].contains(argument)
                proxyNext = argument == "--proxy"
            }
            if hideNext {
                masked.append("***")
            } else if proxyNext {
                masked.append(Redaction.redactingProxies(argument))
            } else if argument.contains("proxy=") {
                masked.append(maskingProxyOption(argument))
            } else if argument.hasPrefix("--header=") || argument.hasPrefix("--cookie=") {
                masked.append(argument.prefix { $0 != "=" } + "=***")
            } else if argument.contains("header=") || argument.contains("cookie=") {
                masked.append(argument.hasPrefix("-o") && argument.count > 2 ? "-o***" : "***")
            } else {
                masked.append(argument.contains("://") ? Redaction.redactingEach(argument) : argument)
            }
        }
        return masked
    }

    /// `--proxy=CHAIN`, or an `-o` list holding `proxy=CHAIN`, with every proxy of the chain redacted (and the
    /// header or cookie of the same list hidden, as alone).
    private static func maskingProxyOption(_ argument: String) -> String {
        if argument.contains("header=") || argument.contains("cookie=") {
            return argument.hasPrefix("-o") && argument.count > 2 ? "-o***" : "***"
        }
        return argument.split(separator: ",", omittingEmptySubsequences: false).map { item -> String in
            for prefix in ["--proxy=", "-oproxy=", "proxy="] where item.hasPrefix(prefix) {
                return prefix + Redaction.redactingProxies(String(item.dropFirst(prefix.count)))
            }
            return item.contains("://") ? Redaction.redactingEach(String(item)) : String(item)
        }.joined(separator: ",")
    }

    /// In the child: tell the parent the mount is ready with `status`, then point stderr at the log file (or
    /// /dev/null), so the parent's pipe closes and it can exit.
    /// stderr moves to the log first and the marker goes last down the pipe: a line that another thread logs
    /// meanwhile (a mirror's probe, say) lands either before the marker, where the parent still reads, or in the
    /// log; written after the marker, the parent had stopped reading and it was lost.
    static func reportReady(_ status: Int32, logFile: String?) {
        let pipe = dup(2)
        let target = logFile.map { open($0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) } ?? -1
        let descriptor = target >= 0 ? target : open("/dev/null", O_WRONLY | O_CLOEXEC)
        dup2(descriptor, 2)
        close(descriptor)
        guard pipe >= 0 else { return }
        let marker = readinessMarker + "\(status)\n"
        _ = marker.withCString { write(pipe, $0, strlen($0)) }
        close(pipe)
    }
}
