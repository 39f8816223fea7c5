// A small HTTP/1.1 origin on 127.0.0.1 that misbehaves on request, for the failures nginx will not produce:
// connections dropped mid-body, Range ignored, Content-Range lies, content changed under a reader, stalls.
// One thread accepts; each connection gets its own thread and keep-alive, like a real server.

import Foundation
import Glibc

/// What the origin does wrong, per file.
public enum Fault: Sendable, Equatable {
    case none
    /// Answer ranged requests with the whole file as 200 (a server without Range support).
    case ignoreRange
    /// Send the bytes, and a Content-Range, `shift` bytes later than asked.
    case shiftContentRange(Int)
    /// Close the connection after this many body bytes, for the next `times` responses.
    case dropAfter(bytes: Int, times: Int)
    /// Read the request and never answer (until the fault is cleared or the origin stops).
    case stall
    /// Send every body at this many bytes per second.
    case throttle(Int)
}

public final class FaultOrigin: @unchecked Sendable {
    // @unchecked Sendable: the listening socket is immutable; everything mutable is guarded by `lock`.
    public let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var files: [String: (bytes: [UInt8], etag: String)] = [:]
    private var faults: [String: Fault] = [:]
    private var sent: [String: UInt64] = [:]
    private var ranges: [String: [String]] = [:]
    private var stopped = false

    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 128) == 0 else { throw TestSupportError("fault origin: cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// Stops accepting; safe to call more than once (a second close would hit another socket's descriptor).
    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    public func url(_ name: String) -> String { "http://127.0.0.1:\(port)/\(name)" }

    public func serve(_ name: String, bytes: [UInt8], etag: String) {
        lock.withLock { files["/" + name] = (bytes, etag) }
    }

    public func setFault(_ fault: Fault, for name: String) {
        lock.withLock { faults["/" + name] = fault }
    }

    /// Body bytes written to sockets for `name` (including ones a dropped connection never delivered).
    public func bodyBytesSent(_ name: String) -> UInt64 { lock.withLock { sent["/" + name] ?? 0 } }

    /// The Range headers received for `name`, "" for none, in order.
    public func rangesRequested(_ name: String) -> [String] { lock.withLock { ranges["/" + name] ?? [] } }

    private var isStopped: Bool { lock.withLock { stopped } }

    private func acceptLoop() {
        while !isStopped {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            var one: Int32 = 1
            setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            Thread.detachNewThread { [self] in
                serve(connection)
                close(connection)
            }
        }
    }

    /// Serves requests on one connection until it closes or a fault ends it.
    private func serve(_ connection: Int32) {
        var buffer: [UInt8] = []
        while !isStopped {
            guard let head = readHead(connection, &buffer) else { return }
            let lines = head.split(separator: "\r\n").map(String.init)
            let parts = lines.first?.split(separator: " ") ?? []
            guard parts.count >= 2 else { return }
            let path = String(parts[1])
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            guard respond(connection, path: path, headers: headers) else { return }
        }
    }

    private func readHead(_ connection: Int32, _ buffer: inout [UInt8]) -> String? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        while true {
            if let end = buffer.indices.dropLast(3).first(where: { Array(buffer[$0..<($0 + 4)]) == terminator }) {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                return head
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let got = recv(connection, &chunk, chunk.count, 0)
            if got <= 0 { return nil }
            buffer += chunk[..<got]
        }
    }

    /// Answers one request; returns whether the connection may serve another.
    private func respond(_ connection: Int32, path: String, headers: [String: String]) -> Bool {
        let (file, fault) = lock.withLock { () -> ((bytes: [UInt8], etag: String)?, Fault) in
            ranges[path, default: []].append(headers["range"] ?? "")
            var fault = faults[path] ?? .none
            // A drop is spent only on a response long enough to be cut.
            if case .dropAfter(let bytes, let times) = fault {
                if let file = files[path], Self.bodyLength(headers["range"], total: file.bytes.count) > bytes {
                    faults[path] = times > 1 ? .dropAfter(bytes: bytes, times: times - 1) : Fault.none
                } else {
                    fault = .none
                }
            }
            return (files[path], fault)
        }
        if fault == .stall {
            while !isStopped && lock.withLock({ faults[path] }) == .stall { usleep(20_000) }
            return false
        }
        guard let file else {
            return write(connection, Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".utf8))
        }
        let total = file.bytes.count
        var status = "200 OK"
        var body = file.bytes[...]
        var extra = "Accept-Ranges: bytes\r\n"
        if fault == .ignoreRange { extra = "" }
        let ifRangeHolds = headers["if-range"].map { $0 == file.etag } ?? true
        if let range = headers["range"], fault != .ignoreRange, ifRangeHolds,
           let (first, last) = Self.parseRange(range, total: total) {
            var (from, to) = (first, last)
            if case .shiftContentRange(let shift) = fault { (from, to) = (min(total - 1, from + shift), min(total - 1, to + shift)) }
            status = "206 Partial Content"
            body = file.bytes[from...to]
            extra = "Content-Range: bytes \(from)-\(to)/\(total)\r\n"
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Length: \(body.count)\r\nETag: \(file.etag)\r\n"
            + "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\(extra)Connection: keep-alive\r\n\r\n"
        guard write(connection, Array(head.utf8)) else { return false }
        var limit = Int.max
        if case .dropAfter(let bytes, _) = fault { limit = bytes }
        var offset = body.startIndex
        let cutoff = body.startIndex + min(limit, body.count)
        while offset < body.endIndex {
            let end = min(body.endIndex, offset + 65536, cutoff)
            if end <= offset { return false }  // the fault: close mid-body
            guard write(connection, Array(body[offset..<end])) else { return false }
            lock.withLock { sent[path, default: 0] += UInt64(end - offset) }
            if case .throttle(let rate) = fault { usleep(useconds_t(Double(end - offset) / Double(rate) * 1_000_000)) }
            offset = end
        }
        return limit == Int.max || body.count <= limit
    }

    private static func bodyLength(_ range: String?, total: Int) -> Int {
        guard let range, let (first, last) = parseRange(range, total: total) else { return total }
        return last - first + 1
    }

    private static func parseRange(_ header: String, total: Int) -> (Int, Int)? {
        guard header.hasPrefix("bytes="), total > 0 else { return nil }
        let bounds = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int(bounds[0]), first < total else { return nil }
        let last = Int(bounds[1]).map { min($0, total - 1) } ?? total - 1
        return first <= last ? (first, last) : nil
    }

    private func write(_ connection: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let wrote = bytes[done...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if wrote <= 0 { return false }
            done += wrote
        }
        return true
    }
}
