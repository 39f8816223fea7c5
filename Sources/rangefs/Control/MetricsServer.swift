// `--metrics ADDR:PORT`: the mount's counters over HTTP, in the Prometheus text format, for the people who run
// rangefs on many machines. One thread accepts (AcceptLoop.swift); each request is one GET answered and closed
// (HTTP/1.0), up to four at once, and a client gets 5 s to send its request and 5 s per send to take the answer: a
// scraper that hangs, or trickles its request a byte at a time, holds up no other.

import Dispatch
import FoundationEssentials
import Glibc
import Logging
import RangeFSPlatform

/// Serves `GET /metrics` on a TCP address until `stop`.
final class MetricsServer: @unchecked Sendable {
    // @unchecked Sendable: `loop` is immutable; the text source is a Sendable closure.
    /// Accepts; answers at most four requests at once.
    private let loop: AcceptLoop
    private let text: @Sendable () -> String
    /// The time a client has to send its request.
    private static let requestDeadline = 5.0

    /// Where to listen.
    struct Address: Equatable {
        let address: String
        let port: UInt16
    }

    /// `ADDR:PORT`, `:PORT` or `PORT` (address 127.0.0.1); nil when the text is no such thing.
    static func parse(_ text: String) -> Address? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, let port = UInt16(parts.last ?? ""), port > 0 else { return nil }
        let address = parts.count == 2 && !parts[0].isEmpty ? String(parts[0]) : "127.0.0.1"
        var probe = in_addr()
        guard inet_pton(AF_INET, address, &probe) == 1 else { return nil }
        return Address(address: address, port: port)
    }

    /// Listens on `address:port`; throws the one-line reason when it cannot.
    init(address: String, port: UInt16, text: @escaping @Sendable () -> String) throws {
        self.text = text
        switch SocketServing.listenTCP(address: address, port: port) {
        case .success(let listening):
            loop = AcceptLoop(listener: listening.listener, name: "rangefs-metrics", concurrency: 4)
        case .failure(let failure):
            throw MountRunner.Failure("cannot serve --metrics on \(address):\(port) (\(failure.reason)); choose another port")
        }
        loop.start { [self] connection in answer(connection) }
    }

    func stop() {
        loop.stop()
    }

    private func answer(_ connection: Int32) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The request line is all that matters; the headers end at an empty line.
        let deadline = Date().addingTimeInterval(Self.requestDeadline)
        while received.count < 16 << 10 && Date() < deadline {
            let got = recv(connection, &buffer, buffer.count, 0)
            if got <= 0 { break }
            received += buffer[..<got]
            if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") { break }
        }
        let line = String(decoding: received.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") },
                          as: UTF8.self).split(separator: " ")
        let response: String
        if line.count >= 2, line[0] == "GET", line[1] == "/metrics" || line[1].hasPrefix("/metrics?") {
            let body = text()
            response = "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        } else {
            let body = "rangefs serves its metrics at GET /metrics\n"
            response = "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
                + "Connection: close\r\n\r\n" + body
        }
        _ = Array(response.utf8).withUnsafeBytes { SocketServing.send($0, to: connection) }
    }
}
