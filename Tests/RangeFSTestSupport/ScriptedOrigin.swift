// A purpose-written origin: a small Python server on 127.0.0.1 doing one odd thing (a lying, throttling or
// version-mixing server), started from a script the test holds. The script gets `PORT ROOT LOG [ARGUMENT...]`: the
// port to listen on, the folder whose files it serves, and the file it logs one line per answer to, fields split by
// spaces. The tests that use it (LyingServerTests, BusyServerTests, VersionMixTests) read that log, not rangefs's
// counters, to count what was asked.

import Foundation
import Glibc

/// A purpose-written Python server, its folder and its log.
public struct ScriptedOrigin: Sendable {
    public let folder: TemporaryDirectory
    public let server: BackgroundProcess
    public let port: Int
    /// The folder the server serves files from.
    public let root: String

    /// Starts `script` (Python) on a free port, in a new folder named after `prefix`, with `arguments` after the
    /// three every script takes.
    public init(script: String, prefix: String, arguments: [String] = []) throws {
        let folder = try TemporaryDirectory(prefix: prefix)
        let root = folder.path + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let path = folder.path + "/" + prefix + ".py"
        try script.write(toFile: path, atomically: false, encoding: .utf8)
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [path, String(port), root, folder.path + "/answers.log"] + arguments,
                                  logPath: folder.path + "/server.out")
        }
        (self.folder, self.server, self.port, self.root) = (folder, server, port, root)
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// The URL of `name` under the server's mode `mode` (its first path segment).
    public func url(_ mode: String, _ name: String) -> String { url(mode + "/" + name) }

    /// The log's lines, each split into its fields.
    public var log: [[String]] {
        ((try? String(contentsOfFile: folder.path + "/answers.log", encoding: .utf8)) ?? "")
            .split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    }

    /// Writes `bytes` as the file `name` in one step (a reader never sees half of it), dated `mtime` seconds after
    /// the epoch when given.
    public func write(_ name: String, _ bytes: [UInt8], mtime: Int? = nil) throws {
        let path = root + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        guard let mtime else { return }
        var times = [timespec(tv_sec: mtime, tv_nsec: 0), timespec(tv_sec: mtime, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw TestSupportError("cannot date \(path)") }
    }

    /// The bytes of the file `name` as the server has it now.
    public func bytes(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + name)))
    }
}
