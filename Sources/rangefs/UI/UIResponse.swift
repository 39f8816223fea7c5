// The answers `rangefs ui` sends, and the JSON of its actions. Every answer closes its connection, forbids caching
// (the page and its data are live, and hold the token) and framing, and carries no CORS header: another site's
// page can neither read an answer nor be shown this one inside it.

import FoundationEssentials
import RangeFSControl

/// One HTTP answer.
struct UIResponse {
    var status: Int
    var reason: String
    var type: String
    var body: [UInt8]
    var headers: [(String, String)] = []

    init(status: Int, reason: String, type: String, body: [UInt8]) {
        self.status = status
        self.reason = reason
        self.type = type
        self.body = body
    }

    /// A plain-text answer: an error's one line.
    static func text(_ status: Int, _ reason: String, _ text: String) -> UIResponse {
        UIResponse(status: status, reason: reason, type: "text/plain; charset=utf-8", body: Array(text.utf8))
    }

    /// `value` as JSON; 504 when it is nil (the mounts did not answer in time).
    static func json(_ value: (some Encodable)?) -> UIResponse {
        // Our own Encodable values always encode; nil (no answer in time) is what the 504 is for.
        guard let value, let data = try? JSONEncoder().encode(value) else {
            return text(504, "Gateway Timeout", "the mounts did not answer in time\n")
        }
        return UIResponse(status: 200, reason: "OK", type: "application/json", body: [UInt8](data))
    }

    /// The script and the style come from this server only; nothing may frame the page or be sent elsewhere.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The head and the body, ready to send.
    var bytes: [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n"
            + "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
            + "Referrer-Policy: no-referrer\r\nContent-Security-Policy: \(Self.contentSecurityPolicy)\r\n"
            + "Connection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }
}

/// An action the page posts: a control command for one file of one mount (for add, a URL line).
struct UIAction: Decodable {
    var mount: Int
    var command: String
    var name: String?
    /// For add: a URL, then any mirrors and `sha256=HEX`, as `rangefs add` takes them.
    var url: String?
}

/// What an action (or a block map) came to: the mount's message, or its refusal in one line.
struct UIActionResult: Encodable {
    var ok: Bool
    var message: String?
    var error: String?

    init(ok: Bool, message: String?, error: String?) {
        self.ok = ok
        self.message = message
        self.error = error
    }

    /// Runs `perform` (a control request) and keeps its message or its error.
    init(perform: () throws -> ControlResponse) {
        do {
            let response = try perform()
            self.init(ok: true, message: response.message, error: nil)
        } catch {
            self.init(ok: false, message: nil, error: "\(error)")
        }
    }
}
