import Foundation
import Glibc
import RangeFSTestSupport

/// `python3 -m http.server`'s handler: no Range, no ETag, a Content-Length and a Last-Modified. It serves one random
/// file, `big.bin`, pausing `pause` seconds after each 256 KiB, and logs the body bytes it wrote to each connection
/// until the client hung up: what it sent, which its own log does not say.
struct NoRangeOrigin {
    let server: BackgroundProcess
    let url: String
    /// The served file, and the log of body bytes (one number per answer).
    let file: String
    let log: String

    init(folder: String, size: Int, pause: Double = 0) throws {
        let root = folder + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let file = root + "/big.bin", log = folder + "/sent.log", script = folder + "/server.py"
        try Shell.run("/usr/bin/head", ["-c", String(size), "/dev/urandom"], stdoutFile: file)
        try """
        import functools, http.server, sys, time
        port, root, log, pause = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
        class Counting(http.server.SimpleHTTPRequestHandler):
            def copyfile(self, source, destination):
                sent = 0
                try:
                    while chunk := source.read(256 * 1024):
                        destination.write(chunk)
                        sent += len(chunk)
                        if pause:
                            time.sleep(pause)
                finally:
                    with open(log, "a") as file:
                        file.write(f"{sent}\\n")
            def log_message(self, *arguments):
                pass
        handler = functools.partial(Counting, directory=root)
        http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
        """.write(toFile: script, atomically: false, encoding: .utf8)
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port), root, log, String(pause)],
                                  logPath: folder + "/server.out")
        }
        (self.server, self.file, self.log) = (server, file, log)
        url = "http://127.0.0.1:\(port)/big.bin"
    }

    /// The body bytes the server wrote, summed over its answers.
    var sent: Int {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .compactMap { Int($0) }.reduce(0, +)
    }
}
