// `rangefs ui`'s HTTP server: the page, its event stream, a file's fine block map, and the actions. It listens on
// 127.0.0.1 unless told otherwise, and answers nobody without the token (UIToken.swift):
//
//   - `GET /?token=T` spends the token into a cookie (HttpOnly, SameSite=Strict, named after the port) and sends
//     the browser to `/`, so the token leaves the address bar and the history; after that the cookie is the key.
//   - Every other request, the page included, needs the cookie or the `X-Rangefs-Token` header: 401 without.
//   - Actions are POSTs that need the header even with the cookie (another site's page can make a browser send
//     the cookie with a form post, never set a header without CORS, and no answer here carries a CORS header),
//     and an `Origin`, if sent, of this server: 403 otherwise.
//   - The `Host` must name this server (127.0.0.1, localhost or the address it listens on, with its port): a page
//     of another site whose name was pointed at 127.0.0.1 (DNS rebinding) is refused before the token is looked at.
//   - Answers forbid framing and caching, and the page's Content-Security-Policy allows only its own script.
//
// Each connection carries one request; the event stream holds its connection, one of at most `streams` at once.

import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSPlatform

/// Serves the page until the process ends.
final class UIServer: @unchecked Sendable {
    // @unchecked Sendable: every field is immutable after init; the feed and the loop are thread-safe.
    let address: String
    let port: UInt16
    private let token: UIToken
    private let feed: UIFeed
    private let loop: AcceptLoop
    /// The `Host` values this server answers to.
    private let hosts: Set<String>
    /// Connections answered at once: event streams hold theirs for as long as their page is open.
    static let streams = 16

    /// The cookie the token is spent into; one per port, so two `rangefs ui` on one host keep theirs apart.
    var cookieName: String { "rangefs_ui_\(port)" }
    /// The page's own origin, what its POSTs' `Origin` must be.
    var origins: Set<String> { Set(hosts.map { "http://" + $0 }) }

    /// Listens on `address:port` (port 0: one the kernel picks); throws the one-line reason when it cannot.
    init(address: String, port: UInt16, token: UIToken, feed: UIFeed) throws {
        let boundPort: UInt16
        switch SocketServing.listenTCP(address: address, port: port) {
        case .success(let listening):
            boundPort = listening.port
            loop = AcceptLoop(listener: listening.listener, name: "rangefs-ui", concurrency: Self.streams)
        case .failure(let failure):
            throw CLIError("cannot serve the page on \(address):\(port) (\(failure.reason)); choose another with --listen ADDR:PORT")
        }
        self.port = boundPort
        self.address = address
        self.token = token
        self.feed = feed
        hosts = Set(["127.0.0.1", "localhost", address].map { "\($0):\(boundPort)" })
        loop.start { [self] connection in answer(connection) }
    }

    /// The URL to open, with the token.
    var url: String { "http://\(address == "0.0.0.0" ? "127.0.0.1" : address):\(port)/?token=\(token.value)" }

    private func answer(_ connection: Int32) {
        guard let request = UIRequest.read(from: connection) else {
            return send(connection, UIResponse.text(400, "Bad Request", "send one HTTP request\n"))
        }
        // Listening on every address, the host a remote browser names cannot be known; the token still guards.
        if address != "0.0.0.0" && !hosts.contains(request.headers["host"] ?? "") {
            return send(connection, UIResponse.text(403, "Forbidden", "this server answers to \(hosts.sorted().joined(separator: " or ")) only\n"))
        }
        if request.method == "GET" && request.path == "/" && request.query["token"] != nil {
            guard token.matches(request.query["token"]) else {
                return send(connection, UIResponse.text(403, "Forbidden", "wrong token; open the URL rangefs ui printed\n"))
            }
            var response = UIResponse(status: 303, reason: "See Other", type: "text/plain", body: [])
            response.headers.append(("Location", "/"))
            response.headers.append(("Set-Cookie", "\(cookieName)=\(token.value); Path=/; HttpOnly; SameSite=Strict"))
            return send(connection, response)
        }
        let headerToken = request.headers["x-rangefs-token"]
        guard token.matches(headerToken) || token.matches(request.cookie(cookieName)) else {
            return send(connection, UIResponse.text(401, "Unauthorized",
                                                    "no token: open the URL rangefs ui printed (it carries ?token=)\n"))
        }
        if request.method == "POST" {
            guard token.matches(headerToken) else {
                return send(connection, UIResponse.text(403, "Forbidden", "an action must carry the token in X-Rangefs-Token\n"))
            }
            if let origin = request.headers["origin"], !origins.contains(origin) {
                return send(connection, UIResponse.text(403, "Forbidden", "actions are taken from this server's page only\n"))
            }
            if let site = request.headers["sec-fetch-site"], site != "same-origin" && site != "none" {
                return send(connection, UIResponse.text(403, "Forbidden", "actions are taken from this server's page only\n"))
            }
        }
        route(request, connection)
    }

    private func route(_ request: UIRequest, _ connection: Int32) {
        switch (request.method, request.path) {
        case ("GET", "/"):
            send(connection, UIResponse(status: 200, reason: "OK", type: "text/html; charset=utf-8",
                                        body: Array(UIPage.html(token: token.value).utf8)))
        case ("GET", "/app.css"):
            send(connection, UIResponse(status: 200, reason: "OK", type: "text/css; charset=utf-8", body: Array(UIPage.css.utf8)))
        case ("GET", "/app.js"):
            send(connection, UIResponse(status: 200, reason: "OK", type: "text/javascript; charset=utf-8",
                                        body: Array(UIPage.script.utf8)))
        case ("GET", "/api/state"):
            send(connection, UIResponse.json(feed.event(since: 0, seconds: 10)))
        case ("GET", "/api/events"):
            stream(connection)
        case ("GET", "/api/blockmap"):
            send(connection, blockMap(request.query))
        case ("POST", "/api/action"):
            send(connection, action(request.body))
        case (_, "/"), (_, "/app.css"), (_, "/app.js"), (_, "/api/state"), (_, "/api/events"), (_, "/api/blockmap"),
             (_, "/api/action"):
            send(connection, UIResponse.text(405, "Method Not Allowed", "\(request.method) is not allowed here\n"))
        default:
            send(connection, UIResponse.text(404, "Not Found", "no such page\n"))
        }
    }

    /// Server-sent events: the state at once, then what changed, each second while the mounts are polled; a
    /// comment every 15 s keeps a quiet stream open. Ends when the page goes away (a send fails).
    private func stream(_ connection: Int32) {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
            + "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
        guard sendAll(Array(head.utf8), to: connection) else { return }
        var since = 0
        while true {
            var chunk: [UInt8]
            if let event = feed.event(since: since, seconds: 15) {
                since = event.generation
                chunk = Array("event: state\ndata: ".utf8)
                // The event is our own Encodable value and always encodes; `{}` would only skip one update.
                chunk += (try? JSONEncoder().encode(event)).map { [UInt8]($0) } ?? Array("{}".utf8)
                chunk += Array("\n\n".utf8)
            } else {
                chunk = Array(": still here\n\n".utf8)
            }
            guard sendAll(chunk, to: connection) else { return }
        }
    }

    private func blockMap(_ query: [String: String]) -> UIResponse {
        guard let mount = query["mount"].flatMap({ Int($0) }), let client = feed.client(mount), let name = query["name"],
              let width = query["width"].flatMap({ Int($0) }) else {
            return UIResponse.text(400, "Bad Request", "blockmap needs mount, name and width\n")
        }
        return UIResponse.json(UIActionResult(perform: { try client.perform(ControlRequest(command: .blockmap, name: name, width: width)) }))
    }

    /// An action the page asks for: the control request the CLI would send for it.
    private func action(_ body: [UInt8]) -> UIResponse {
        // A body that is not an action is answered 400 with what one looks like; the decoder's detail adds nothing.
        guard let asked = try? JSONDecoder().decode(UIAction.self, from: Data(body)) else {
            return UIResponse.text(400, "Bad Request", "an action is a JSON object: {mount, command, name, url}\n")
        }
        let commands: [String: ControlRequest.Command] = ["pause": .pause, "resume": .resume, "pin": .pin,
                                                           "evict": .evict, "verify": .verify, "rm": .rm, "add": .add]
        guard let command = commands[asked.command], let client = feed.client(asked.mount) else {
            return UIResponse.text(400, "Bad Request", "unknown command or mount: \(asked.command) on \(asked.mount)\n")
        }
        let request: ControlRequest
        if command == .add {
            let source: MountSource
            do {
                source = try MountSource(parsingLine: asked.url ?? "")
            } catch {
                return UIResponse.json(UIActionResult(ok: false, message: nil, error: error.message))
            }
            request = ControlRequest(command: .add, name: asked.name.flatMap { $0.isEmpty ? nil : $0 }, url: source.url,
                                     mirrors: source.mirrors.isEmpty ? nil : source.mirrors, checksum: source.checksum,
                                     archives: source.archives ? true : nil)
        } else {
            request = ControlRequest(command: command, name: asked.name)
        }
        let result = UIActionResult(perform: { try client.perform(request) })
        feed.refresh()
        return UIResponse.json(result)
    }

    private func send(_ connection: Int32, _ response: UIResponse) {
        _ = sendAll(response.bytes, to: connection)
    }

    private func sendAll(_ bytes: [UInt8], to connection: Int32) -> Bool {
        bytes.withUnsafeBytes { SocketServing.send($0, to: connection) }
    }
}
