import Foundation
import Glibc

/// Going to the background the safe way for a threaded program: no fork, but a fresh copy of this program in
/// the foreground, in its own session, whose stderr is a pipe the parent reads until the readiness line.
enum Daemon {
    /// Starts the background child and waits until it is mounted or has failed; returns the exit status.
    static func spawnAndWait() -> Int32 {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            printError("rangefs: cannot create a pipe: \(String(cString: strerror(errno)))")
            return MountRunner.Status.failed
        }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        posix_spawn_file_actions_addclose(&actions, readEnd)
        posix_spawn_file_actions_addclose(&actions, writeEnd)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // glibc's POSIX_SPAWN_SETSID (0x80) is defined only under _GNU_SOURCE, which Swift's Glibc module lacks.
        let spawnSetSessionID: Int16 = 0x80
        posix_spawnattr_setflags(&attributes, spawnSetSessionID)

        let executable = "/proc/self/exe"
        let arguments = CommandLine.arguments
        var environment = ProcessInfo.processInfo.environment
        environment[daemonChildVariable] = "1"
        let cArguments = arguments.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (cArguments + cEnvironment).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, cArguments, cEnvironment)
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            printError("rangefs: cannot start the background process: \(String(cString: strerror(spawned)))")
            return MountRunner.Status.failed
        }

        let reader = FileHandle(fileDescriptor: readEnd, closeOnDealloc: true)
        var pending = Data()
        while true {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if line.hasPrefix(readinessMarker) {
                    return Int32(line.dropFirst(readinessMarker.count)) ?? MountRunner.Status.failed
                }
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        }
        // The child exited before it was ready: its status says why.
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let exited = status & 0x7f == 0
        return exited ? max((status >> 8) & 0xff, MountRunner.Status.failed) : MountRunner.Status.failed
    }

    /// In the child: tell the parent the mount is ready with `status`, then point stderr at the log file (or
    /// /dev/null), so the parent's pipe closes and it can exit.
    static func reportReady(_ status: Int32, logFile: String?) {
        FileHandle.standardError.write(Data((readinessMarker + "\(status)\n").utf8))
        let target = logFile.map { open($0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) } ?? -1
        let descriptor = target >= 0 ? target : open("/dev/null", O_WRONLY | O_CLOEXEC)
        dup2(descriptor, 2)
        close(descriptor)
    }
}
