// Runs helper programs (fusermount3) with posix_spawn and waitpid. Foundation's Process was seen to miss a child's
// exit and wait forever on a reaped-never zombie; a blocking waitpid on the one PID we started cannot.

import Glibc

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
    /// Runs `executable` with `arguments` (not including argv[0]), standard input from /dev/null, and collects
    /// its output. With `timeout`, a program still running then is killed (SIGKILL) and reported as status 137.
    /// With `outputPath`, standard output goes to that file instead of being collected.
    public static func run(_ executable: String, _ arguments: [String], outputPath: String? = nil,
                           timeout: Double? = nil) throws(SystemError) -> SubprocessResult {
        var outputPipe: [Int32] = [-1, -1], errorPipe: [Int32] = [-1, -1]
        // pipe2 is hidden behind _GNU_SOURCE; set close-on-exec right after pipe so other spawns do not inherit
        // these ends (the spawned program gets its copies through dup2, which clears the flag).
        try retryingEINTR("pipe", executable) { pipe(&outputPipe) }
        try retryingEINTR("pipe", executable) { pipe(&errorPipe) }
        for descriptor in outputPipe + errorPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let outputPath {
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        }
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(outputPipe[1])
        close(errorPipe[1])
        defer {
            close(outputPipe[0])
            close(errorPipe[0])
        }
        guard spawned == 0 else { throw SystemError(call: "posix_spawn", path: executable, errno: spawned) }

        var output: [UInt8] = [], errors: [UInt8] = []
        var open = [outputPipe[0], errorPipe[0]]
        let deadline = timeout.map { monotonicSeconds() + $0 }
        var killed = false
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let wait = deadline.map { max(0, Int32(($0 - monotonicSeconds()) * 1000)) } ?? -1
            let ready = poll(&fds, nfds_t(fds.count), wait)
            if ready == 0, !killed {
                kill(pid, SIGKILL)
                killed = true
                continue
            }
            for descriptor in fds where descriptor.revents != 0 {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let got = read(descriptor.fd, &buffer, buffer.count)
                if got > 0 {
                    if descriptor.fd == outputPipe[0] { output += buffer[..<got] } else { errors += buffer[..<got] }
                } else if got == 0 || (got < 0 && errno != EINTR) {
                    open.removeAll { $0 == descriptor.fd }
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        let code = signal == 0 ? (status >> 8) & 0xff : 128 + signal
        return SubprocessResult(status: code, standardOutput: output, standardError: errors)
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
