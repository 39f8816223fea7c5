import Foundation
import Glibc
import RangeFSProcess

/// Going to the background the safe way for a threaded program: no fork, but a fresh copy of this program in
/// the foreground, in its own session, whose stderr is a pipe the parent reads until the readiness line.
enum Daemon {
    /// Starts the background child and waits until it is mounted or has failed; returns the exit status.
    static func spawnAndWait() -> Int32 {
        var environment = ProcessInfo.processInfo.environment
        environment[daemonChildVariable] = "1"
        let pid: pid_t
        let readEnd: Int32
        do {
            let pipe = try Subprocess.pipe()
            readEnd = pipe.read
            defer { close(pipe.write) }
            pid = try Subprocess.spawn("/proc/self/exe", arguments: CommandLine.arguments, environment: environment,
                                       output: .null, error: .descriptor(pipe.write), newSession: true)
        } catch {
            printError("rangefs: cannot start the background process: \(error)")
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
        let status = Subprocess.wait(for: pid)
        return status < 128 ? max(status, MountRunner.Status.failed) : MountRunner.Status.failed
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
