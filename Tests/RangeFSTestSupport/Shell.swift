import Foundation
import Glibc
@testable import RangeFSSystem
import Synchronization
import RangeFSProcess

/// An error from the test fixtures, with a message that says what to fix.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The result of running a program.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs programs for tests, with captured output and a time limit, so no test can hang.
public enum Shell {
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String], stdoutFile: String? = nil,
                           timeout: Double = 120) throws -> ProcessResult {
        let result = try Subprocess.run(executable, arguments, outputPath: stdoutFile, timeout: timeout)
        if result.status == 137 {
            throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) did not finish in \(timeout) s")
        }
        return ProcessResult(status: result.status, stdout: result.outputText, stderr: result.errorText)
    }

    /// The SHA-256 of a file, from sha256sum.
    /// The sha256 of `data`, in hex as sha256sum prints it.
    public static func sha256(of data: Data) -> String {
        SHA256.digest(data).map { String(format: "%02x", $0) }.joined()
    }

    public static func sha256(of path: String) throws -> String {
        let result = try run("/usr/bin/sha256sum", [path], timeout: 600)
        guard result.status == 0, let digest = result.stdout.split(separator: " ").first else {
            throw TestSupportError("sha256sum \(path) failed: \(result.stderr)")
        }
        return String(digest)
    }
}

/// A program started in the background and stopped by its PID.
public final class BackgroundProcess: @unchecked Sendable {
    // @unchecked Sendable: `pid` is immutable; `exitStatus` is guarded by `lock`.
    public let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Starts `executable`; its output goes to `logPath` (or /dev/null). `environment` adds variables.
    public init(_ executable: String, _ arguments: [String], logPath: String? = nil,
                environment extra: [String: String] = [:]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var variables = ProcessInfo.processInfo.environment
        for (key, value) in extra { variables[key] = value }
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw TestSupportError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
    }

    deinit { stop() }

    /// Whether it is still running (reaps it if it exited).
    public var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        if exitStatus != nil { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            exitStatus = status
            return false
        }
        return true
    }

    /// Sends `signal` and waits up to `timeout` seconds for the exit, then SIGKILLs; returns the raw wait status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
        if isRunning { kill(pid, signal) }
        if let status = waitForExit(timeout: timeout) { return status }
        kill(pid, SIGKILL)
        return waitForExit(timeout: 5)
    }

    /// Starts a server with `start(port)` on a random port, and another port if it does not listen there (taken,
    /// say, by one of the many client sockets the tests leave in TIME_WAIT), up to 5 times; returns it and its port.
    public static func listening(_ start: (Int) throws -> BackgroundProcess) throws -> (BackgroundProcess, Int) {
        for _ in 0..<5 {
            let port = TestPorts.random()
            let process = try start(port)
            if process.waitForPort(port) { return (process, port) }
            process.stop()
        }
        throw TestSupportError("the server did not listen on any of 5 ports")
    }

    /// Waits up to 5 s until this server accepts connections on 127.0.0.1:`port`; false if it exits or does not.
    public func waitForPort(_ port: Int) -> Bool {
        for _ in 0..<100 {
            if !isRunning { return false }
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(socket) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if connected == 0 { return true }
            usleep(50_000)
        }
        return false
    }

    /// Waits for the process to end by itself; nil if it is still running after `timeout`.
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(10_000) }
        lock.lock()
        defer { lock.unlock() }
        return exitStatus
    }
}

/// A directory under /tmp, removed when released unless kept.
public final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked Sendable: `path` is immutable; `kept` is set once before sharing.
    public let path: String
    private var kept = false

    public init(prefix: String) throws {
        var template = Array("/tmp/rangefs-test-\(prefix)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestSupportError("cannot create a temporary directory under /tmp")
        }
        path = String(cString: made)
    }

    /// Leaves the directory in place; its owner removes it.
    public func keep() { kept = true }

    deinit {
        if !kept { try? FileManager.default.removeItem(atPath: path) }
    }
}

/// Ports for the tests' servers: below Linux's ephemeral range (32768-60999), from which client sockets take
/// their local ports. A server halted on a port in that range could find it taken by a client when it restarts,
/// and a client connecting to a halted server's port could be given that very port as its own and connect to
/// itself (TCP simultaneous open), reading back its own request as the answer.
///
/// A port is handed out once per test process, and only when nothing holds it: two of a test's servers given the
/// same port would both seem to start (the second one's wait for the port reaches the first), and a test would
/// count one server's traffic under the other's name.
public enum TestPorts {
    private static let handedOut = Mutex<Set<Int>>([])

    public static func random() -> Int {
        handedOut.withLock { handedOut in
            while true {
                let port = Int.random(in: 20000...32000)
                guard !handedOut.contains(port), isFree(port) else { continue }
                handedOut.insert(port)
                return port
            }
        }
    }

    /// Whether a socket can bind 127.0.0.1:`port` now: no listener holds it, nor a connection on it as its local
    /// port.
    private static func isFree(_ port: Int) -> Bool {
        let probe = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { return true }
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
