import Foundation

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
                           environment: [String: String]? = nil, timeout: Double = 120) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let output = Pipe(), errors = Pipe()
        if let stdoutFile {
            _ = FileManager.default.createFile(atPath: stdoutFile, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: stdoutFile)
        } else {
            process.standardOutput = output
        }
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read both pipes while the process runs, so a chatty program cannot block on a full pipe.
        let collected = LockedData()
        let group = DispatchGroup()
        for (pipe, isError) in [(output, false), (errors, true)] where !(stdoutFile != nil && !isError) {
            group.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collected.set(data, isError: isError)
                group.leave()
            }
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) did not finish in \(timeout) s")
        }
        process.waitUntilExit()
        group.wait()
        return ProcessResult(status: process.terminationStatus, stdout: collected.text(isError: false),
                             stderr: collected.text(isError: true))
    }

    /// The SHA-256 of a file, from sha256sum.
    public static func sha256(of path: String) throws -> String {
        let result = try run("/usr/bin/sha256sum", [path], timeout: 600)
        guard result.status == 0, let digest = result.stdout.split(separator: " ").first else {
            throw TestSupportError("sha256sum \(path) failed: \(result.stderr)")
        }
        return String(digest)
    }
}

private final class LockedData: @unchecked Sendable {
    // @unchecked Sendable: both fields are guarded by `lock`.
    private let lock = NSLock()
    private var output = Data(), errors = Data()

    func set(_ data: Data, isError: Bool) {
        lock.lock()
        defer { lock.unlock() }
        if isError { errors = data } else { output = data }
    }

    func text(isError: Bool) -> String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: isError ? errors : output, as: UTF8.self)
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
