// A python origin that checks a token in each request's query, shared by the tests of URL queries as credentials
// (QuerySecretTests, CredentialStoreTests).

import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// A server (Python's standard library) that serves the files of a folder, with Range, only to requests whose
/// query has the right `token` (the one in its `token` file, or in `NAME.token` beside file NAME, read per request);
/// others get 403. It logs
/// `STATUS ok|bad RANGE` per request, before answering.
struct TokenOrigin {
    let folder: TemporaryDirectory
    let server: BackgroundProcess
    let port: Int
    let log: String

    /// From now on only `token` is right.
    func accept(_ token: String) throws {
        try token.write(toFile: folder.path + "/token", atomically: true, encoding: .utf8)
    }

    /// The logged requests, as (status, whether the token was right, range).
    var requests: [(status: Int, tokenRight: Bool, range: String)] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, let status = Int(parts[0]) else { return nil }
            return (status, parts[1] == "ok", String(parts[2]))
        }
    }
}

extension MountTestCase {
    /// Starts a TokenOrigin on 127.0.0.1 that takes `token`.
    func startTokenOrigin(token: String) throws -> TokenOrigin {
        let folder = try TemporaryDirectory(prefix: "token-origin")
        try FileManager.default.createDirectory(atPath: folder.path + "/root", withIntermediateDirectories: true)
        let script = folder.path + "/token.py"
        let log = folder.path + "/requests.log"
        try """
        import http.server, os, sys, urllib.parse
        port, root, log, token_file = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
        class TokenHandler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            def do_GET(self):
                path, _, query = self.path.partition("?")
                name = os.path.join(root, urllib.parse.unquote(path).lstrip("/"))
                # A file with its own token (NAME.token beside it) takes that one only.
                own = name + ".token"
                with open(own if os.path.isfile(own) else token_file) as file:
                    right = urllib.parse.parse_qs(query).get("token") == [file.read()]
                wanted = self.headers.get("Range", "-")
                headers = {}
                if not right:
                    status, body = 403, b"wrong or missing token\\n"
                elif not os.path.isfile(name):
                    status, body = 404, b"not found\\n"
                else:
                    with open(name, "rb") as source:
                        data = source.read()
                    headers = {"ETag": '"v1"', "Accept-Ranges": "bytes",
                               "Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"}
                    status, body = 200, data
                    if wanted.startswith("bytes="):
                        first, _, last = wanted[6:].partition("-")
                        first = int(first)
                        last = min(int(last) if last else len(data) - 1, len(data) - 1)
                        status, body = 206, data[first:last + 1]
                        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
                # Logged before the answer: a request whose answer rangefs saw is always in the log.
                with open(log, "a") as file:
                    file.write(f"{status} {'ok' if right else 'bad'} {wanted.replace(' ', '')}\\n")
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *arguments):
                pass
        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True
        Server(("127.0.0.1", port), TokenHandler).serve_forever()
        """.write(toFile: script, atomically: false, encoding: .utf8)
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port), folder.path + "/root", log,
                                                       folder.path + "/token"], logPath: folder.path + "/server.out")
        }
        let origin = TokenOrigin(folder: folder, server: server, port: port, log: log)
        try origin.accept(token)
        return origin
    }

    /// Writes `size` random bytes as `name` in the origin's folder; returns their SHA-256.
    func serveRandom(_ origin: TokenOrigin, _ name: String, size: Int) throws -> String {
        let path = origin.folder.path + "/root/" + name
        try Shell.run("/usr/bin/head", ["-c", String(size), "/dev/urandom"], stdoutFile: path)
        return try Shell.sha256(of: path)
    }

    /// Gives file `name` of the origin its own token: only `token` is right for it from now on.
    func setToken(_ token: String, of name: String, in origin: TokenOrigin) throws {
        try token.write(toFile: origin.folder.path + "/root/" + name + ".token", atomically: true, encoding: .utf8)
    }
}
