// Starts programs with posix_spawn: helpers whose output is collected (fusermount3, and the tests' tools), and
// rangefs's own background child. Foundation's Process was seen to miss a child's exit and wait forever on a
// reaped-never zombie; a blocking waitpid on the one PID we started cannot.

import CLinux
import Glibc

/// A failed call while starting or watching a program.
public struct SpawnError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let program: String
    public let errno: Int32

    public var description: String { "\(call) \(program): \(String(cString: strerror(errno)))" }
}

/// Where one of a spawned program's standard descriptors goes.
public enum SpawnTarget: Sendable {
    /// /dev/null.
    case null
    /// A file, created or truncated (0644).
    case file(String)
    /// A descriptor of this process (which stays open here).
    case descriptor(Int32)
}

/// The outcome of a finished program.
public struct SubprocessResult: Sendable {
    /// The exit status, or 128 + signal number if a signal ended it.
    public var status: Int32
    public var standardOutput: [UInt8]
    public var standardError: [UInt8]

    public var errorText: String { String(decoding: standardError, as: UTF8.self) }
    public var outputText: String { String(decoding: standardOutput, as: UTF8.self) }
}

public enum Subprocess {
    /// Starts `executable` with `arguments` (argv[0] included) and `environment` (this process's if nil), its
    /// standard input, output and error going to `input`, `output` and `error`. With `newSession`, the program
    /// starts a new session (setsid), detached from this terminal. Returns its PID; the caller waits for it.
    public static func spawn(_ executable: String, arguments: [String], environment: [String: String]? = nil,
                             input: SpawnTarget = .null, output: SpawnTarget, error: SpawnTarget,
                             newSession: Bool = false) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, target) in [(Int32(0), input), (1, output), (2, error)] {
            switch target {
            case .null:
                posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .descriptor(let source):
                posix_spawn_file_actions_adddup2(&actions, source, descriptor)
            }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A program starts with the signals this process ignores or blocks for its own handling (SIGINT, SIGTERM,
        // SIGHUP through dispatch sources, SIGPIPE) at their defaults: otherwise a stop sent to it before it set up
        // its own handling was lost (issue 45: a daemon that had not installed its watcher yet).
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, number) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        var flags = Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        if newSession { flags |= rfs_posix_spawn_setsid() }
        posix_spawnattr_setflags(&attributes, flags)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { (argv + (envp ?? [])).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = envp.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw SpawnError(call: "posix_spawn", program: executable, errno: spawned) }
        return pid
    }

    /// A pipe whose ends are closed in spawned programs unless given to them as a `SpawnTarget`.
    public static func pipe() throws(SpawnError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard rfs_pipe_cloexec(&ends) == 0 else { throw SpawnError(call: "pipe", program: "", errno: errno) }
        return (ends[0], ends[1])
    }

    /// Waits for `pid` to end; returns its exit status, or 128 + the signal that ended it.
    public static func wait(for pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Runs `executable` with `arguments` (not including argv[0]), standard input from /dev/null, and collects
    /// its output. With `timeout`, a program still running then is killed (SIGKILL) and reported as status 137.
    /// With `outputPath`, standard output goes to that file instead of being collected.
    public static func run(_ executable: String, _ arguments: [String], outputPath: String? = nil,
                           timeout: Double? = nil) throws(SpawnError) -> SubprocessResult {
        let outputPipe = try pipe()
        let errorPipe = try pipe()
        defer {
            close(outputPipe.read)
            close(errorPipe.read)
        }
        let pid: pid_t
        do throws(SpawnError) {
            pid = try spawn(executable, arguments: [executable] + arguments,
                            output: outputPath.map(SpawnTarget.file) ?? .descriptor(outputPipe.write),
                            error: .descriptor(errorPipe.write))
        } catch {
            close(outputPipe.write)
            close(errorPipe.write)
            throw error
        }
        close(outputPipe.write)
        close(errorPipe.write)

        var output: [UInt8] = [], errors: [UInt8] = []
        var open = [outputPipe.read, errorPipe.read]
        let deadline = timeout.map { monotonicSeconds() + $0 }
        var killed = false
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let waitMilliseconds = deadline.map { max(0, Int32(($0 - monotonicSeconds()) * 1000)) } ?? -1
            let ready = poll(&fds, nfds_t(fds.count), waitMilliseconds)
            if ready == 0, !killed {
                kill(pid, SIGKILL)
                killed = true
                continue
            }
            for descriptor in fds where descriptor.revents != 0 {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let got = read(descriptor.fd, &buffer, buffer.count)
                if got > 0 {
                    if descriptor.fd == outputPipe.read { output += buffer[..<got] } else { errors += buffer[..<got] }
                } else if got == 0 || (got < 0 && errno != EINTR) {
                    open.removeAll { $0 == descriptor.fd }
                }
            }
        }
        return SubprocessResult(status: wait(for: pid), standardOutput: output, standardError: errors)
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
