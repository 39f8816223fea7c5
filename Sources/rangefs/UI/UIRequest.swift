// One HTTP/1.1 request to the web page, as `rangefs ui` reads it: the request line, the headers (names in lower
// case) and a body of up to 64 KiB (an action's JSON). Each connection carries one request and is closed after its
// answer (or, for the event stream, when the page goes away), so there is no keep-alive or chunking to parse.

import Glibc
import RangeFSPlatform

/// A request read from a connection.
struct UIRequest {
    var method: String
    /// The path without its query.
    var path: String
    /// The query's parameters, percent-decoded.
    var query: [String: String]
    /// Header names in lower case; a repeated header keeps its last value.
    var headers: [String: String]
    var body: [UInt8]

    /// The largest head and the largest body read; a bigger request is refused unread.
    static let headLimit = 16 << 10
    static let bodyLimit = 64 << 10

    /// Reads one request from `connection` (whose receive timeout bounds each wait); nil when the client sent no
    /// whole request or a too large one.
    static func read(from connection: Int32) -> UIRequest? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var headEnd: Int?
        while headEnd == nil {
            guard received.count < headLimit else { return nil }
            let got = recv(connection, &buffer, buffer.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            received += buffer[..<got]
            headEnd = endOfHead(received)
        }
        guard let headEnd, var request = parseHead(Array(received[..<headEnd])) else { return nil }
        let length = request.headers["content-length"].flatMap { Int($0) } ?? 0
        guard length >= 0, length <= bodyLimit else { return nil }
        var body = Array(received[(headEnd + 4)...])
        while body.count < length {
            let got = recv(connection, &buffer, buffer.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            body += buffer[..<got]
        }
        request.body = Array(body.prefix(length))
        return request
    }

    /// Where `\r\n\r\n` starts, if it has come.
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10
            && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// The request line and headers; nil unless the line is `METHOD TARGET HTTP/x`.
    static func parseHead(_ head: [UInt8]) -> UIRequest? {
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let parts = lines.first?.split(separator: " ") ?? []
        guard parts.count == 3, parts[2].hasPrefix("HTTP/") else { return nil }
        let target = String(parts[1])
        let path = String(target.prefix { $0 != "?" })
        var query: [String: String] = [:]
        if let mark = target.firstIndex(of: "?") {
            for pair in target[target.index(after: mark)...].split(separator: "&") {
                let key = String(pair.prefix { $0 != "=" })
                let value = pair.contains("=") ? String(pair[pair.index(after: pair.firstIndex(of: "=")!)...]) : ""
                query[PercentEncoding.decode(key)] = PercentEncoding.decode(value)
            }
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmed()
        }
        return UIRequest(method: String(parts[0]), path: path, query: query, headers: headers, body: [])
    }

    /// The value of the cookie `name`, if the request carries it.
    func cookie(_ name: String) -> String? {
        for pair in (headers["cookie"] ?? "").split(separator: ";") {
            let trimmed = String(pair).trimmed()
            if trimmed.hasPrefix(name + "=") { return String(trimmed.dropFirst(name.count + 1)) }
        }
        return nil
    }
}
