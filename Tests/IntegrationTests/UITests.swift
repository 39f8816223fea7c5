// Issue 50: `rangefs ui`, the local web page. The browser test drives Debian's headless chromium through selenium
// (Browser/ui_check.py, which says what it checks) against a real mount whose origin is throttled, so a copy takes
// long enough to be watched; the security test needs no browser, only curl.

import Foundation
import Glibc
@testable import RangeFSControl
import RangeFSTestSupport
import XCTest

final class UITests: MountTestCase {
    /// An origin whose /ui/ folder sends 256 KiB/s per connection, with nginx's request counters at /nginx_status.
    func throttledOrigin() throws -> NginxOrigin {
        var extras = NginxOrigin.Extras()
        extras.locations = { _, _ in "location /ui/ { limit_rate 256k; }\n location = /nginx_status { stub_status; }" }
        return try NginxOrigin(extras)
    }

    /// `rangefs ui --mount M` in the background; returns it and the URL it printed.
    func startUI(_ extra: [String] = []) throws -> (BackgroundProcess, String) {
        let log = scratch.path + "/ui.log"
        let ui = try BackgroundProcess(driver.binary, ["ui", "--mount", mountpoint] + extra, logPath: log)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("http://") }) { return (ui, String(line)) }
            guard ui.isRunning else { throw TestSupportError("rangefs ui exited: \(text)") }
            usleep(20_000)
        }
        throw TestSupportError("rangefs ui printed no URL in 60 s")
    }

    /// curl's answer: the headers and body, then the status code on the last line.
    func curl(_ arguments: [String]) throws -> (code: Int, text: String) {
        let result = try Shell.run("/usr/bin/curl", ["-s", "-i", "-w", "\n%{http_code}"] + arguments)
        let code = Int(result.stdout.split(separator: "\n").last ?? "") ?? 0
        return (code, result.stdout)
    }

    func testWithoutTheTokenEveryURLIsRefusedAndAForeignOriginCannotAct() throws {
        _ = try origin.serveRandomFile("guarded.bin", size: 1 << 20)
        try mount(["guarded.bin=" + origin.url("guarded.bin")])
        let (ui, url) = try startUI()
        defer { ui.stop(signal: SIGINT) }
        let base = String(String(url.prefix { $0 != "?" }).dropLast())
        let token = String(url.split(separator: "=").last!)
        let port = base.split(separator: ":").last!

        // The token file: the token, mode 0600.
        let tokenPath = ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid())
            + "/ui-\(port).token"
        XCTAssertEqual(try String(contentsOfFile: tokenPath, encoding: .utf8), token + "\n")
        XCTAssertEqual(try statFile(tokenPath).st_mode & 0o777, 0o600)

        // No token: every page, data and action URL answers 401 or 403, and none carries a CORS header.
        let guarded = ["/", "/app.js", "/app.css", "/api/state", "/api/events", "/api/blockmap?mount=0&name=guarded.bin&width=10",
                       "/nowhere"]
        for path in guarded {
            let answer = try curl(["--max-time", "10", base + path])
            XCTAssertTrue([401, 403].contains(answer.code), "\(path): \(answer.text)")
            XCTAssertFalse(answer.text.lowercased().contains("access-control-allow"), answer.text)
            XCTAssertFalse(answer.text.contains("guarded.bin\""), "\(path) showed data: \(answer.text)")
        }
        let post = ["-X", "POST", "-H", "Content-Type: application/json", "--data", #"{"mount":0,"command":"pin","name":"guarded.bin"}"#]
        XCTAssertTrue([401, 403].contains(try curl(post + [base + "/api/action"]).code))
        XCTAssertEqual(try curl([base + "/?token=" + String(repeating: "0", count: 64)]).code, 403, "a wrong token")

        // The token is spent into an HttpOnly, SameSite=Strict cookie.
        let visit = try curl([url])
        XCTAssertEqual(visit.code, 303, visit.text)
        let cookieLine = try XCTUnwrap(visit.text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") })
        XCTAssertTrue(cookieLine.contains("HttpOnly") && cookieLine.contains("SameSite=Strict"), String(cookieLine))
        let cookie = String(cookieLine.dropFirst("set-cookie: ".count).prefix { $0 != ";" })
        let page = try curl(["-H", "Cookie: " + cookie, base + "/"])
        XCTAssertEqual(page.code, 200, page.text)
        XCTAssertTrue(page.text.contains("Content-Security-Policy:"), page.text)
        let state = try curl(["-H", "Cookie: " + cookie, base + "/api/state"])
        XCTAssertEqual(state.code, 200, state.text)
        XCTAssertTrue(state.text.contains("\"name\":\"guarded.bin\""), state.text)
        // Another host name pointed at 127.0.0.1 (DNS rebinding) is refused, cookie or not.
        XCTAssertEqual(try curl(["-H", "Cookie: " + cookie, "-H", "Host: attacker.example:\(port)", base + "/api/state"]).code, 403)

        // Actions: the cookie alone is not enough (a form of another site sends it), nor is the header with a
        // foreign Origin; the mount's status shows that none of them acted.
        XCTAssertEqual(try curl(post + ["-H", "Cookie: " + cookie, base + "/api/action"]).code, 403)
        let foreign = try curl(post + ["-H", "X-Rangefs-Token: " + token, "-H", "Origin: http://attacker.example",
                                       base + "/api/action"])
        XCTAssertEqual(foreign.code, 403, foreign.text)
        let crossSite = try curl(post + ["-H", "X-Rangefs-Token: " + token, "-H", "Sec-Fetch-Site: cross-site",
                                         base + "/api/action"])
        XCTAssertEqual(crossSite.code, 403, crossSite.text)
        XCTAssertEqual(try pinned("guarded.bin"), false, "no refused action pinned the file")
        XCTAssertEqual(try curl(["-X", "GET", "-H", "X-Rangefs-Token: " + token, base + "/api/action"]).code, 405)

        // The page's own request acts.
        let own = try curl(post + ["-H", "X-Rangefs-Token: " + token, "-H", "Origin: " + base, base + "/api/action"])
        XCTAssertEqual(own.code, 200, own.text)
        XCTAssertTrue(own.text.contains("\"ok\":true"), own.text)
        XCTAssertEqual(try pinned("guarded.bin"), true)

        // Interrupted, it removes its token file.
        XCTAssertNotNil(ui.stop(signal: SIGINT))
        XCTAssertFalse(FileManager.default.fileExists(atPath: tokenPath))
    }

    /// Whether `rangefs status` shows `name` pinned.
    func pinned(_ name: String) throws -> Bool? {
        let files = try XCTUnwrap(statusJSON()["files"] as? [[String: Any]])
        return files.first { $0["name"] as? String == name }?["pinned"] as? Bool
    }

    func testThePageShowsACopyGrowAndItsButtonsPausePinAndEvict() throws {
        guard let missing = Self.browserMissing else { return try runBrowserCheck() }
        if ProcessInfo.processInfo.environment["CI"] == "true" { XCTFail(missing); return }
        print(String(repeating: "!", count: 72) + "\n" + missing + "\n" + String(repeating: "!", count: 72))
        throw XCTSkip(missing)
    }

    /// nil when chromium, chromedriver and selenium are installed, else the reason the browser test skips.
    static var browserMissing: String? {
        let found = ["/usr/bin/chromium", "/usr/bin/chromedriver", "/opt/selenium/selenium/__init__.py"]
            .filter { !FileManager.default.fileExists(atPath: $0) }
        return found.isEmpty ? nil : "SKIPPING: \(found.joined(separator: ", ")) missing; run mount-scripts/install-deps.sh"
    }

    private func runBrowserCheck() throws {
        let throttled = try throttledOrigin()
        defer { throttled.stop() }
        try FileManager.default.createDirectory(atPath: throttled.path("ui"), withIntermediateDirectories: true)
        let growing = try throttled.serveRandomFile("ui/growing.bin", size: 24 << 20)
        let pausable = try throttled.serveRandomFile("ui/pausable.bin", size: 24 << 20)
        _ = try throttled.serveRandomFile("ui/small.txt", size: 4096)
        // A URL with a secret in its query: the page must show it as status does, without the value.
        try mount(["growing.bin=" + throttled.url("ui/growing.bin"), "pausable.bin=" + throttled.url("ui/pausable.bin"),
                   "small.txt=" + throttled.url("ui/small.txt") + "?sig=SECRETVALUE42"])
        let (ui, url) = try startUI()
        defer { ui.stop(signal: SIGINT) }
        let artifacts = repositoryRoot() + "/.build/test-artifacts"
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let script = repositoryRoot() + "/Tests/IntegrationTests/Browser/ui_check.py"
        let arguments = ["--url", url, "--mount", mountpoint, "--rangefs", driver.binary,
                         "--access-log", URL(fileURLWithPath: throttled.root).deletingLastPathComponent().path + "/logs/access.log",
                         "--nginx-status", "http://127.0.0.1:\(throttled.port)/nginx_status",
                         "--growing", "growing.bin=\(growing)", "--pausable", "pausable.bin=\(pausable)",
                         "--secret", "SECRETVALUE42", "--work", scratch.path, "--screenshot", artifacts + "/ui.png"]
        let result = try Shell.run("/usr/bin/env", ["PYTHONPATH=/opt/selenium", "/usr/bin/python3", script] + arguments,
                                   timeout: 900)
        print(result.stdout + result.stderr)
        print("screenshot: \(artifacts)/ui.png")
        XCTAssertEqual(result.status, 0, "ui_check.py failed:\n" + result.stdout + result.stderr)
    }
}
