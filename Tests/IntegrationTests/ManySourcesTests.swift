import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 28: one file from several mirrors at once, and proxy groups with failover. Real nginx mirrors, each behind
/// the benchmark's pacing proxy (a per-connection cap), real tinyproxy proxies, real mounts, default options apart
/// from the one under test. Traffic is counted in each server's own log.
final class ManySourcesTests: MountTestCase {
    /// The benchmark's pacing proxy: caps each connection at `bytesPerSecond`; killing it is a mirror dying.
    func capProxy(to port: Int, bytesPerSecond: Int) throws -> (BackgroundProcess, Int) {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("bench/capproxy.py").path
        return try BackgroundProcess.listening { listen in
            try BackgroundProcess("/usr/bin/python3", [script, String(listen), String(port), String(bytesPerSecond)])
        }
    }

    /// Waits until `path` holds at least `bytes` (a copy in progress), or `timeout` passes.
    func waitForSize(_ path: String, atLeast bytes: Int, timeout: Double) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var info = stat()
            if stat(path, &info) == 0 && Int(info.st_size) >= bytes { return }
            usleep(20_000)
        }
    }

    // 1. Three nginx mirrors of a 256 MiB file, each capped per connection: the copy draws from all three, one is
    //    killed mid-copy and the copy still completes with the right bytes; a fourth with another length is dropped.
    func testACopyDrawsFromEveryMirrorAndSurvivesOneDyingWhileAMirrorOfAnotherLengthIsDropped() throws {
        let size = 256 << 20
        let mirrors = try (0..<3).map { _ in try NginxOrigin() }
        let other = try NginxOrigin()
        defer {
            mirrors.forEach { $0.stop() }
            other.stop()
        }
        let expected = try mirrors[0].serveRandomFile("big.bin", size: size)
        for mirror in mirrors.dropFirst() {
            XCTAssertEqual(link(mirrors[0].path("big.bin"), mirror.path("big.bin")), 0)
        }
        try other.serveRandomFile("big.bin", size: size + 4096)
        let paced = try mirrors.map { try capProxy(to: $0.port, bytesPerSecond: 8 << 20) }
        defer { paced.forEach { _ = $0.0.stop(signal: SIGKILL) } }
        let urls = paced.map { "http://127.0.0.1:\($0.1)/big.bin" } + [other.url("big.bin")]
        let log = scratch.path + "/rangefs.log"

        let mounted = try mount(["big.bin=" + urls.joined(separator: " ")], extra: ["--log-file", log])
        let copy = scratch.path + "/copy"
        let cp = try BackgroundProcess("/bin/cp", [mountpoint + "/big.bin", copy])
        waitForSize(copy, atLeast: 96 << 20, timeout: 60)
        let killedAt = dataBytes(mirrors[1], "/big.bin")
        _ = paced[1].0.stop(signal: SIGKILL)  // the second mirror dies mid-copy
        XCTAssertEqual(cp.waitForExit(timeout: 120), 0, "the copy ended with an error or hung")
        XCTAssertEqual(try Shell.sha256(of: copy), expected)

        let drawn = mirrors.map { dataBytes($0, "/big.bin") }
        for (index, bytes) in drawn.enumerated() {
            XCTAssertGreaterThan(bytes, 8 << 20, "mirror \(index + 1) served little of the copy: \(drawn)")
        }
        XCTAssertGreaterThan(killedAt, 0, "the killed mirror had served nothing before it died: \(drawn)")
        XCTAssertEqual(dataBytes(other, "/big.bin"), 0, "the mirror of another length served data")
        // Before the mount is up its log goes to the mount command's stderr; after, to the file.
        let text = mounted.stderr + (try String(contentsOfFile: log, encoding: .utf8))
        XCTAssertTrue(text.contains("mirror \(other.url("big.bin")) is dropped for \(urls[0]): its length is "
                                    + "\(size + 4096) bytes, not \(size)"), text)

        let file = try XCTUnwrap((try statusJSON()["files"] as? [[String: Any]])?.first { $0["name"] as? String == "big.bin" })
        let states = try XCTUnwrap(file["mirrors"] as? [[String: Any]]).map { $0["state"] as? String ?? "" }
        XCTAssertEqual(states.count, 4, "\(file)")
        XCTAssertEqual(states[3], "dropped", "\(file)")
        XCTAssertEqual(states[0], "usable", "\(file)")

        // The mirrors are saved with the file: a remount with no URL has them again.
        try driver.unmount(mountpoint, cache: cache)
        let saved = try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8)
        for url in urls.dropFirst() { XCTAssertTrue(saved.contains(url), saved) }
    }

    // 1a. A mirror that stops answering mid-copy (its process frozen, its connections open) is left after seconds:
    //     the copy goes on from the other two and ends with the right bytes, long before libcurl's low-speed
    //     timeout (20 s, which a copy used to wait out on each request the frozen mirror held).
    func testAMirrorThatFreezesMidCopyIsLeftWithinSeconds() throws {
        let size = 128 << 20
        let mirrors = try (0..<3).map { _ in try NginxOrigin() }
        defer { mirrors.forEach { $0.stop() } }
        let expected = try mirrors[0].serveRandomFile("big.bin", size: size)
        for mirror in mirrors.dropFirst() {
            XCTAssertEqual(link(mirrors[0].path("big.bin"), mirror.path("big.bin")), 0)
        }
        let paced = try mirrors.map { try capProxy(to: $0.port, bytesPerSecond: 8 << 20) }
        defer {
            kill(paced[1].0.pid, SIGCONT)
            paced.forEach { _ = $0.0.stop(signal: SIGKILL) }
        }
        let urls = paced.map { "http://127.0.0.1:\($0.1)/big.bin" }
        try mount(["big.bin=" + urls.joined(separator: " ")])
        let copy = scratch.path + "/copy"
        let cp = try BackgroundProcess("/bin/cp", [mountpoint + "/big.bin", copy])
        waitForSize(copy, atLeast: 32 << 20, timeout: 60)
        XCTAssertEqual(kill(paced[1].0.pid, SIGSTOP), 0)  // the second mirror freezes with requests in flight
        let frozen = Date()
        let frozenAt = dataBytes(mirrors[1], "/big.bin")
        XCTAssertEqual(cp.waitForExit(timeout: 60), 0, "the copy ended with an error or hung")
        let afterFreeze = Date().timeIntervalSince(frozen)
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        XCTAssertLessThan(afterFreeze, 14, "the copy waited on the frozen mirror")
        XCTAssertGreaterThan(frozenAt, 0, "the frozen mirror had served nothing before it froze")

        let file = try XCTUnwrap((try statusJSON()["files"] as? [[String: Any]])?.first { $0["name"] as? String == "big.bin" })
        let second = try XCTUnwrap((file["mirrors"] as? [[String: Any]])?[1])
        XCTAssertTrue((second["last_error"] as? String ?? "").contains("stopped sending"), "\(second)")
    }

    // 1b. A mirror whose file changed answers its own If-Range with 200: it is set aside (a remote change is a
    //     mirror failure), the read goes on elsewhere, and none of its new bytes is ever mixed in.
    func testAMirrorWhoseFileChangedIsSetAsideAndTheReadGoesOnElsewhere() throws {
        let size = 32 << 20
        let first = try NginxOrigin()
        let second = try NginxOrigin()
        defer {
            first.stop()
            second.stop()
        }
        let expected = try first.serveRandomFile("file.bin", size: size)
        try FileManager.default.copyItem(atPath: first.path("file.bin"), toPath: second.path("file.bin"))
        try mount(["file.bin=\(first.url("file.bin")) \(second.url("file.bin"))"])
        XCTAssertEqual(try pread(mountpoint + "/file.bin", offset: 0, count: 1 << 20).count, 1 << 20)
        // The second mirror's copy is rewritten with other bytes of the same length (a new ETag).
        sleep(1)
        try second.serveRandomFile("file.bin", size: size)
        XCTAssertEqual(try pread(mountpoint + "/file.bin", offset: 8 << 20, count: 1 << 20).count, 1 << 20)
        sleep(3)  // past the first backoff: the changed mirror is asked again, and must again be refused
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/file.bin"), expected)
        XCTAssertGreaterThan(second.accessLog().filter { $0.path == "/file.bin" && $0.status == 200 }.count, 0,
                             "the changed mirror was never asked, so this test proved nothing")
    }

    // Mirrors from the other two places: a server's `Link: <URL>; rel=duplicate` (with --mirrors-from-links),
    // and `rangefs add URL MIRROR`; both show in status, serve bytes, and are saved with the file.
    func testMirrorsFromLinkHeadersAndFromAdd() throws {
        let second = try NginxOrigin()
        defer { second.stop() }
        var extras = NginxOrigin.Extras()
        extras.locations = { _, _ in
            "location = /linked.bin { add_header Link '<http://127.0.0.1:\(second.port)/linked.bin>; rel=duplicate'; }"
        }
        let first = try NginxOrigin(extras)
        defer { first.stop() }
        let linked = try first.serveRandomFile("linked.bin", size: 16 << 20)
        try FileManager.default.copyItem(atPath: first.path("linked.bin"), toPath: second.path("linked.bin"))
        let added = try first.serveRandomFile("added.bin", size: 16 << 20)
        try FileManager.default.copyItem(atPath: first.path("added.bin"), toPath: second.path("added.bin"))

        try mount([first.url("linked.bin")], extra: ["--mirrors-from-links"])
        let result = try driver.run(["add", first.url("added.bin"), second.url("added.bin"), "--mount", mountpoint])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/linked.bin"), linked)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/added.bin"), added)
        let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
        for (name, mirror) in [("linked.bin", second.url("linked.bin")), ("added.bin", second.url("added.bin"))] {
            let file = try XCTUnwrap(files.first { $0["name"] as? String == name })
            let urls = (file["mirrors"] as? [[String: Any]] ?? []).compactMap { $0["url"] as? String }
            XCTAssertEqual(urls, [first.url(name), mirror], "\(file)")
            XCTAssertGreaterThan(dataBytes(second, "/" + name), 0, "the mirror of \(name) served nothing")
        }
        // Without the option, a Link header adds nothing.
        try driver.unmount(mountpoint, cache: cache)
        let saved = try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8)
        XCTAssertTrue(saved.contains(second.url("added.bin")), saved)
        let plain = scratch.path + "/plain"
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
        let mounted = try driver.mount(plain, urls: [first.url("linked.bin")], cache: scratch.path + "/cache2")
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        let status = try driver.run(["status", plain, "--json"])
        XCTAssertFalse(status.stdout.contains("\"mirrors\""), status.stdout)
    }

    /// A tinyproxy on `port` (a random one when nil) that logs each request it carries.
    func tinyproxy(_ folder: String, name: String, port: Int? = nil) throws -> (BackgroundProcess, Int) {
        func start(_ port: Int) throws -> BackgroundProcess {
            try """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            MaxClients 64
            LogFile "\(folder)/\(name).log"
            LogLevel Info
            Allow 127.0.0.1
            PidFile "\(folder)/\(name).pid"
            """.write(toFile: folder + "/\(name).conf", atomically: false, encoding: .utf8)
            return try BackgroundProcess("/usr/bin/tinyproxy", ["-d", "-c", folder + "/\(name).conf"])
        }
        if let port {
            let process = try start(port)
            guard process.waitForPort(port) else { throw TestSupportError("tinyproxy \(name) did not restart") }
            return (process, port)
        }
        return try BackgroundProcess.listening(start)
    }

    /// Requests for `path` a tinyproxy carried, from its log.
    func carried(_ folder: String, _ name: String, _ path: String) -> Int {
        let text = (try? String(contentsOfFile: folder + "/\(name).log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.contains("GET http://") && $0.contains(path + " HTTP") }.count
    }

    // 3. Proxy groups `A|B;C`: the shards reach both A and B; killing both mid-copy moves the copy to C with the
    //    right bytes and no hang; after --proxy-reset-after the mount uses the first group again.
    func testProxyGroupsShardFailOverAndReturnToTheFirstGroup() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tinyproxy") else {
            throw TestSupportError("tinyproxy is not installed; run mount-scripts/install-deps.sh")
        }
        let expected = try origin.serveRandomFile("grouped.bin", size: 128 << 20)
        let later = try origin.serveRandomFile("later.bin", size: 8 << 20)
        // The origin paced per connection, so that the copy is still running when the proxies die.
        let (pacer, pacedPort) = try capProxy(to: origin.port, bytesPerSecond: 4 << 20)
        defer { _ = pacer.stop(signal: SIGKILL) }
        let folder = try TemporaryDirectory(prefix: "proxies")
        var (a, aPort) = try tinyproxy(folder.path, name: "a")
        var (b, bPort) = try tinyproxy(folder.path, name: "b")
        let (c, cPort) = try tinyproxy(folder.path, name: "c")
        defer { [a, b, c].forEach { _ = $0.stop(signal: SIGKILL) } }
        let chain = "http://127.0.0.1:\(aPort)|http://127.0.0.1:\(bPort);http://127.0.0.1:\(cPort)"
        let urls = ["http://127.0.0.1:\(pacedPort)/grouped.bin", "http://127.0.0.1:\(pacedPort)/later.bin"]
        try mount(urls, extra: ["--proxy", chain, "--proxy-reset-after", "8"])

        // The first 32 MiB (and the readahead behind them) are sharded over A and B.
        XCTAssertEqual(try pread(mountpoint + "/grouped.bin", offset: 0, count: 32 << 20).count, 32 << 20)
        XCTAssertGreaterThan(carried(folder.path, "a", "/grouped.bin"), 0)
        XCTAssertGreaterThan(carried(folder.path, "b", "/grouped.bin"), 0)
        XCTAssertEqual(carried(folder.path, "c", "/grouped.bin"), 0)

        let copy = folder.path + "/copy"
        let cp = try BackgroundProcess("/bin/cp", [mountpoint + "/grouped.bin", copy])
        waitForSize(copy, atLeast: 48 << 20, timeout: 60)
        _ = a.stop(signal: SIGKILL)
        _ = b.stop(signal: SIGKILL)
        let killed = Date()
        XCTAssertEqual(cp.waitForExit(timeout: 120), 0, "the copy ended with an error or hung")
        XCTAssertEqual(try Shell.sha256(of: copy), expected)
        XCTAssertGreaterThan(carried(folder.path, "c", "/grouped.bin"), 0, "the copy did not move to C")
        let status = try driver.run(["status", mountpoint])
        XCTAssertTrue(status.stdout.contains("in use: group 2"), status.stdout)

        // A and B come back; once --proxy-reset-after has passed, the first group is used again.
        (a, _) = try tinyproxy(folder.path, name: "a", port: aPort)
        (b, _) = try tinyproxy(folder.path, name: "b", port: bPort)
        let wait = 9 - Date().timeIntervalSince(killed)
        if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
        let cBefore = carried(folder.path, "c", "/later.bin")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/later.bin"), later)
        XCTAssertGreaterThan(carried(folder.path, "a", "/later.bin") + carried(folder.path, "b", "/later.bin"), 0)
        XCTAssertEqual(carried(folder.path, "c", "/later.bin"), cBefore, "the first group was not used again")
    }
}
