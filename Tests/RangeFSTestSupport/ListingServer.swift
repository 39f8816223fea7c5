import Foundation
import Glibc

/// Apache 2 or lighttpd serving a folder with directory listings on 127.0.0.1, with an access log of
/// `status|bytes|range|path` lines like `NginxOrigin`'s. Started from a configuration of its own in a temporary
/// folder, stopped by its PID.
public final class ListingServer: @unchecked Sendable {
    // @unchecked Sendable: immutable after init; the process is stopped once.
    public enum Kind: String, Sendable { case apache, lighttpd }

    public let kind: Kind
    public let port: Int
    private let folder: TemporaryDirectory
    private let process: BackgroundProcess
    private var logPath: String { folder.path + "/access.log" }

    /// Serves `root` (its files must be readable by others: Apache's workers run as www-data).
    /// With `basicAuth` (Apache only), `/private/` asks for that user and password (HTTP basic authentication).
    public init(_ kind: Kind, root: String, basicAuth: (user: String, password: String)? = nil) throws {
        let executable = kind == .apache ? "/usr/sbin/apache2" : "/usr/sbin/lighttpd"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestSupportError("\(executable) is not installed; run mount-scripts/install-deps.sh")
        }
        self.kind = kind
        folder = try TemporaryDirectory(prefix: kind.rawValue)
        var lastError: Error = TestSupportError("\(kind) did not start")
        var extra = ""
        if let basicAuth, kind == .apache {
            let hash = try Shell.run("/usr/bin/openssl", ["passwd", "-apr1", basicAuth.password]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try "\(basicAuth.user):\(hash)\n".write(toFile: folder.path + "/htpasswd", atomically: false, encoding: .utf8)
            chmod(folder.path, 0o755)
            chmod(folder.path + "/htpasswd", 0o644)
            extra = """
            <Location "/private/">
                AuthType Basic
                AuthName "rangefs test"
                AuthUserFile \(folder.path)/htpasswd
                Require valid-user
            </Location>
            """
        }
        for _ in 0..<5 {
            let port = TestPorts.random()
            let configuration = folder.path + "/server.conf"
            try (Self.configuration(kind, root: root, port: port, folder: folder.path) + extra)
                .write(toFile: configuration, atomically: false, encoding: .utf8)
            let arguments = kind == .apache ? ["-f", configuration, "-DFOREGROUND"] : ["-D", "-f", configuration]
            let started = try BackgroundProcess(executable, arguments, logPath: folder.path + "/server.out")
            if started.waitForPort(port) {
                self.port = port
                process = started
                return
            }
            started.stop()
            lastError = TestSupportError("\(kind) did not start on port \(port): "
                + ((try? String(contentsOfFile: folder.path + "/server.out", encoding: .utf8)) ?? ""))
        }
        throw lastError
    }

    deinit { stop() }

    public func stop() {
        process.stop(signal: SIGTERM)
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// The requests served so far. lighttpd buffers its access log and writes it out once a second (or when
    /// asked to reopen it, with SIGUSR1, on its next turn): wait for that.
    public func accessLog() -> [AccessLogLine] {
        if kind == .lighttpd {
            kill(process.pid, SIGUSR1)
            usleep(1_300_000)
        }
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, let status = Int(fields[0]) else { return nil }
            return AccessLogLine(status: status, bodyBytes: UInt64(fields[1]) ?? 0, range: fields[2], path: fields[3])
        }
    }

    public func clearAccessLog() {
        _ = accessLog()
        truncate(logPath, 0)
    }

    private static func configuration(_ kind: Kind, root: String, port: Int, folder: String) -> String {
        switch kind {
        case .apache:
            let modules = ["mpm_event", "authz_core", "autoindex", "dir", "mime", "auth_basic", "authn_core",
                           "authn_file", "authz_user"].map {
                "LoadModule \($0)_module /usr/lib/apache2/modules/mod_\($0).so"
            }.joined(separator: "\n")
            return """
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            PidFile \(folder)/apache.pid
            ErrorLog \(folder)/error.log
            LogFormat "%>s|%B|%{Range}i|%U" counted
            CustomLog \(folder)/access.log counted
            \(modules)
            TypesConfig /etc/mime.types
            User www-data
            Group www-data
            DocumentRoot "\(root)"
            <Directory "\(root)">
                Options +Indexes
                Require all granted
            </Directory>
            IndexOptions FancyIndexing HTMLTable

            """
        case .lighttpd:
            return """
            server.document-root = "\(root)"
            server.bind = "127.0.0.1"
            server.port = \(port)
            server.modules = ("mod_dirlisting", "mod_accesslog")
            dir-listing.activate = "enable"
            accesslog.filename = "\(folder)/access.log"
            accesslog.format = "%>s|%b|%{Range}i|%U"
            server.errorlog = "\(folder)/error.log"
            mimetype.assign = ("" => "application/octet-stream")

            """
        }
    }
}
