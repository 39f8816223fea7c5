// A real nginx on 127.0.0.1 with the stock static-file handler (Range and ETag as nginx does them; its 206 replies
// carry no Accept-Ranges). Each origin has its own prefix, port, document root and access log; tests count what
// it sent from that log.

import Foundation
import Glibc

/// One line of the access log.
public struct AccessLogLine: Equatable, Sendable {
    public var status: Int
    public var bodyBytes: UInt64
    /// The Range header as sent, empty if none.
    public var range: String
    public var path: String
}

/// A running nginx serving `root` on a free loopback port.
public final class NginxOrigin: @unchecked Sendable {
    // @unchecked Sendable: immutable after init; the process handle is only stopped once, from deinit or stop().
    public let root: String
    public let port: Int
    private let prefix: String
    private var process: BackgroundProcess

    /// What a test adds to the configuration, given the port and the prefix: locations in the server, and
    /// directives in `http` (more servers, cache paths). `tls` serves HTTPS (HTTP/2 too) with that certificate.
    public struct Extras: Sendable {
        public var locations: @Sendable (_ port: Int, _ prefix: String) -> String = { _, _ in "" }
        public var http: @Sendable (_ port: Int, _ prefix: String) -> String = { _, _ in "" }
        public var tls: TestCertificates.Server?
        public init() {}
    }

    public let scheme: String

    public init(_ extras: Extras = Extras()) throws {
        scheme = extras.tls == nil ? "http" : "https"
        let directory = try TemporaryDirectory(prefix: "nginx")
        prefix = directory.path
        root = prefix + "/www"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
        var lastError: Error?
        for _ in 0..<5 {
            let port = TestPorts.random()
            let config = Self.configuration(prefix: prefix, port: port, extras: extras)
            try config.write(toFile: prefix + "/nginx.conf", atomically: false, encoding: .utf8)
            guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
                throw TestSupportError("nginx is not installed; run mount-scripts/install-deps.sh")
            }
            let process = try BackgroundProcess("/usr/sbin/nginx", ["-c", prefix + "/nginx.conf", "-p", prefix])
            if process.waitForPort(port) {
                self.port = port
                self.process = process
                directory.keep()
                return
            }
            process.stop()
            lastError = TestSupportError("nginx did not start on port \(port): "
                + ((try? String(contentsOfFile: prefix + "/logs/error.log", encoding: .utf8)) ?? ""))
        }
        throw lastError!
    }

    deinit { stop() }

    /// Stops the server but keeps its files and port, to simulate an origin that went down.
    public func halt() {
        process.stop(signal: SIGTERM)
    }

    /// Starts the server again on the same port after `halt`.
    public func resume() throws {
        process = try BackgroundProcess("/usr/sbin/nginx", ["-c", prefix + "/nginx.conf", "-p", prefix])
        guard process.waitForPort(port) else { throw TestSupportError("nginx did not restart") }
    }

    /// Whether the server runs (not halted).
    public var isRunning: Bool { process.isRunning }

    /// Freezes the server with SIGSTOP (master and workers): the kernel still accepts connections, but nothing
    /// answers, like a hung origin. `thaw` undoes it.
    public func freeze() {
        for pid in processIDs() { kill(pid, SIGSTOP) }
    }

    public func thaw() {
        for pid in processIDs() { kill(pid, SIGCONT) }
    }

    /// The master we started and its children (the workers).
    private func processIDs() -> [pid_t] {
        let master = process.pid
        let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let children = all.compactMap(pid_t.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 1
            else { return false }
            return pid_t(fields[1]) == master  // after the name: state, then the parent's PID
        }
        return [master] + children
    }

    /// Stops nginx (the master we started, by PID) and removes its files.
    public func stop() {
        process.stop(signal: SIGTERM)
        try? FileManager.default.removeItem(atPath: prefix)
    }

    public func url(_ name: String) -> String { "\(scheme)://127.0.0.1:\(port)/\(name)" }

    /// Each request's path, Authorization and Cookie headers, as `path|authorization|cookie` (`-` for none): to
    /// check which credentials reached this server.
    public func credentialLog() -> [String] {
        let text = (try? String(contentsOfFile: prefix + "/logs/credentials.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }
    /// The protocol of each request (`HTTP/1.1`, `HTTP/2.0`).
    public func protocolLog() -> [String] {
        let text = (try? String(contentsOfFile: prefix + "/logs/protocols.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    public func path(_ name: String) -> String { root + "/" + name }

    /// Writes `bytes` as `name` under the document root.
    public func serve(_ name: String, bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path(name)))
    }

    /// Writes `size` pseudo-random bytes as `name` and returns their SHA-256 as hex.
    @discardableResult
    public func serveRandomFile(_ name: String, size: Int) throws -> String {
        try Shell.run("/usr/bin/head", ["-c", String(size), "/dev/urandom"], stdoutFile: path(name))
        return try Shell.sha256(of: path(name))
    }

    /// The access log lines so far. nginx writes each line when its response is complete.
    public func accessLog() -> [AccessLogLine] {
        let text = (try? String(contentsOfFile: prefix + "/logs/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, let status = Int(fields[0]), let bytes = UInt64(fields[1]) else { return nil }
            return AccessLogLine(status: status, bodyBytes: bytes, range: fields[2] == "-" ? "" : fields[2],
                                 path: fields[3])
        }
    }

    /// Body bytes sent so far, for `path` (e.g. "/big.bin") or for everything.
    public func bodyBytesSent(path: String? = nil) -> UInt64 {
        accessLog().filter { path == nil || $0.path == path }.reduce(0) { $0 + $1.bodyBytes }
    }

    /// Empties the access log (nginx keeps appending to the same open file).
    public func clearAccessLog() {
        truncate(prefix + "/logs/access.log", 0)
    }

    private static func configuration(prefix: String, port: Int, extras: Extras) -> String {
        let listen = extras.tls.map { tls in
            """
            listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(tls.certificate);
                    ssl_certificate_key \(tls.key);
            """ + (tls.clientCA.map { "\n        ssl_client_certificate \($0);\n        ssl_verify_client on;" } ?? "")
        } ?? "listen 127.0.0.1:\(port);"
        return """
        daemon off;
        master_process on;
        worker_processes 1;
        user root;
        error_log \(prefix)/logs/error.log;
        pid \(prefix)/logs/nginx.pid;
        events { worker_connections 512; }
        http {
            log_format counted '$status|$body_bytes_sent|$http_range|$uri';
            access_log \(prefix)/logs/access.log counted;
            log_format credentials '$uri|$http_authorization|$http_cookie';
            access_log \(prefix)/logs/credentials.log credentials;
            log_format protocols '$server_protocol';
            access_log \(prefix)/logs/protocols.log protocols;
            client_body_temp_path \(prefix)/logs;
            proxy_temp_path \(prefix)/logs;
            fastcgi_temp_path \(prefix)/logs;
            uwsgi_temp_path \(prefix)/logs;
            scgi_temp_path \(prefix)/logs;
            \(extras.http(port, prefix))
            server {
                \(listen)
                root \(prefix)/www;
                \(extras.locations(port, prefix))
                location /slow/ { limit_rate 32k; }
                location /listed/ { autoindex on; }
                location /listed-json/ { alias \(prefix)/www/listed/; autoindex on; autoindex_format json; }
                location /spiral/ { autoindex on; autoindex_format json; }
                location /fast/ { autoindex on; autoindex_format json; }
                location /big/ { autoindex on; }
                location /big-json/ { alias \(prefix)/www/big/; autoindex on; autoindex_format json; }
                location = /loop/ { return 302 /loop/; }
            }
        }
        """
    }
}
