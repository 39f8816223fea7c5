import Foundation
import Glibc
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 35, case 3: a token in a URL's query (`?token=***`, the shape of every presigned URL) is a credential. It
/// never shows in a rangefs process's argv, an xattr, `status`, the log, or a file of the cache other than the
/// 0600 credentials.json; requests still send it, and a remount with no URLs still has it.
final class QuerySecretTests: MountTestCase {
    /// The command lines of every running rangefs process (found by the executable they run).
    func rangefsCommandLines() throws -> [String] {
        let binary = URL(fileURLWithPath: driver.binary).resolvingSymlinksInPath().path
        var lines: [String] = []
        for pid in try FileManager.default.contentsOfDirectory(atPath: "/proc").compactMap(pid_t.init) {
            guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
                  executable == binary,
                  let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
            lines.append(String(decoding: bytes.map { $0 == 0 ? 32 : $0 }, as: UTF8.self))
        }
        return lines
    }

    /// Every regular file under `folder` whose bytes hold `secret`, with its mode.
    func filesHolding(_ secret: String, under folder: String) throws -> [(path: String, mode: mode_t)] {
        var found: [(String, mode_t)] = []
        let enumerator = try XCTUnwrap(FileManager.default.enumerator(atPath: folder))
        while let relative = enumerator.nextObject() as? String {
            let path = folder + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                  let bytes = FileManager.default.contents(atPath: path) else { continue }
            if bytes.range(of: Data(secret.utf8)) != nil { found.append((relative, info.st_mode & 0o777)) }
        }
        return found
    }

    func testAQueryTokenIsSentButShownNowhereAndARemountWithNoURLsStillHasIt() throws {
        let secret = "q-SECRET-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let origin = try startTokenOrigin(token: secret)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "f.bin", size: 4 << 20)
        let url = "http://127.0.0.1:\(origin.port)/f.bin?token=\(secret)"
        let shown = "http://127.0.0.1:\(origin.port)/f.bin?token=***"
        let log = scratch.path + "/rangefs.log"
        let file = mountpoint + "/f.bin"

        let mounted = try mount([url], extra: ["-v", "--log-file", log])
        XCTAssertEqual(try Shell.sha256(of: file), expected, "the token went out on the wire")
        XCTAssertTrue(origin.requests.contains { $0.status == 206 && $0.tokenRight }, "\(origin.requests)")

        var places: [String: String] = ["mount's output": mounted.stdout + mounted.stderr]
        let commandLines = try rangefsCommandLines()
        XCTAssertFalse(commandLines.isEmpty, "the daemon is a rangefs process")
        XCTAssertTrue(commandLines.contains { $0.contains(mountpoint) && $0.contains(shown) },
                      "the daemon's argv shows the URL redacted: \(commandLines)")
        for (index, line) in commandLines.enumerated() { places["argv of rangefs process \(index)"] = line }
        let xattrs = try Shell.run("/usr/bin/getfattr", ["-d", file])
        XCTAssertTrue(xattrs.stdout.contains("user.rangefs.url=\"\(shown)\""), xattrs.stdout)
        places["getfattr -d"] = xattrs.stdout
        // Text, never base64 (which getfattr -d picks for a value with bytes outside printable ASCII).
        places["getfattr -d -e text"] = try Shell.run("/usr/bin/getfattr", ["-d", "-e", "text", file]).stdout
        places["getfattr -d of the root"] = try Shell.run("/usr/bin/getfattr", ["-d", mountpoint]).stdout
        let status = try driver.run(["status", mountpoint, "--all"])
        XCTAssertTrue(status.stdout.contains("f.bin"), status.stdout)
        places["status"] = status.stdout + status.stderr
        let json = try driver.run(["status", mountpoint, "--json"])
        XCTAssertTrue(json.stdout.contains("token=***"), json.stdout)
        places["status --json"] = json.stdout + json.stderr
        try driver.unmount(mountpoint, cache: cache)

        places["log"] = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(places["log"]!.contains("GET bytes="), "the log has the -v request lines")
        XCTAssertTrue(places["log"]!.contains("f.bin?token=***"), "and they name the URL, redacted")
        for (place, text) in places { XCTAssertFalse(text.contains(secret), "the token appears in \(place)") }

        // The one file of the cache that holds it: credentials.json, mode 0600.
        let holding = try filesHolding(secret, under: cache)
        XCTAssertEqual(holding.map(\.path), ["credentials.json"], "files of the cache holding the token")
        XCTAssertEqual(holding.first?.mode, 0o600)
        XCTAssertTrue(try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8).contains("token=***"))

        // A remount with no URLs sends the token again: a copy of the cache without its data.
        for entry in try FileManager.default.contentsOfDirectory(atPath: cache + "/entries") {
            try FileManager.default.removeItem(atPath: "\(cache)/entries/\(entry)")
        }
        let before = origin.requests.count
        try mount([])
        XCTAssertEqual(try Shell.sha256(of: file), expected)
        let after = origin.requests.dropFirst(before)
        XCTAssertTrue(after.contains { $0.status == 206 && $0.range != "bytes=0-0" }, "read from the server: \(after)")
        XCTAssertEqual(origin.requests.filter { !$0.tokenRight }.count, 0, "every request had the token")
    }

    /// Lays the cache out as an older rangefs left it after mounting `url`: the entry under the whole URL, which
    /// its header, the catalog (`token` in it) and nothing else hold (no credentials.json). Returns the folder.
    func makeOlderCache(url: String, identity: String, token: String) throws -> String {
        // Read without a CacheStore, which would take the cache's lock.
        guard case .entry(let kept) = EntryFiles(root: cache, url: identity).load() else {
            throw XCTSkip("no cache entry for \(identity)")
        }
        XCTAssertEqual(kept.meta.header.url, identity, "the header holds the URL without the token")
        // An older rangefs kept v1 folders only (CacheFormat.swift): this one is migrated when it opens.
        let old = try convertToLegacyEntry(root: cache, url: identity, storedAs: url)
        let catalog = try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8)
        XCTAssertTrue(catalog.contains("token=***"), catalog)
        try catalog.replacingOccurrences(of: "token=***", with: "token=\(token)")
            .write(toFile: cache + "/catalog.json", atomically: false, encoding: .utf8)
        try FileManager.default.removeItem(atPath: cache + "/credentials.json")
        return old
    }

    func testACacheThatHoldsTheWholeURLMountsMovesItAsideAndKeepsItsData() throws {
        let secret = "q-SECRET-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let origin = try startTokenOrigin(token: secret)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "old.bin", size: 3 << 20)
        let url = "http://127.0.0.1:\(origin.port)/old.bin?token=\(secret)"
        let identity = "http://127.0.0.1:\(origin.port)/old.bin?token=***"
        try mount([url])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/old.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)

        let old = try makeOlderCache(url: url, identity: identity, token: secret)

        let before = origin.requests.count
        try mount([])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/old.bin"), expected)
        let after = Array(origin.requests.dropFirst(before))
        XCTAssertFalse(after.contains { $0.range != "bytes=0-0" }, "the cached data was kept: \(after)")
        XCTAssertFalse(after.contains { !$0.tokenRight }, "the token came from the old catalog: \(after)")
        try driver.unmount(mountpoint, cache: cache)

        XCTAssertEqual(access(old, F_OK), -1, "the entry moved to the URL's identity")
        XCTAssertEqual(try filesHolding(secret, under: cache).map(\.path), ["credentials.json"])
        XCTAssertTrue(try String(contentsOfFile: cache + "/catalog.json", encoding: .utf8).contains(identity))
    }

    func testAURLIssuedAgainWithANewTokenFindsItsCacheAndSendsTheNewToken() throws {
        let first = "q-FIRST-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let second = "q-SECOND-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let origin = try startTokenOrigin(token: first)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "p.bin", size: 3 << 20)
        let base = "http://127.0.0.1:\(origin.port)/p.bin?token="
        try mount([base + first])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/p.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)

        // The server now takes only the new token (the old one expired): the same file, found in the cache.
        try origin.accept(second)
        let before = origin.requests.count
        try mount([base + second])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/p.bin"), expected)
        let after = Array(origin.requests.dropFirst(before))
        XCTAssertFalse(after.isEmpty, "the new token was checked with the server")
        XCTAssertFalse(after.contains { $0.range != "bytes=0-0" }, "no byte fetched again: \(after)")
        XCTAssertFalse(after.contains { !$0.tokenRight }, "every request sent the new token: \(after)")
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: cache + "/entries").count, 1)
        let kept = try String(contentsOfFile: cache + "/credentials.json", encoding: .utf8)
        XCTAssertTrue(kept.contains(second) && !kept.contains(first), "the new token replaced the old: \(kept)")
    }

    func testATokenGivenAgainWinsOverTheOneAnOlderCatalogHolds() throws {
        let stale = "q-STALE-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let fresh = "q-FRESH-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let origin = try startTokenOrigin(token: stale)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "s.bin", size: 2 << 20)
        let base = "http://127.0.0.1:\(origin.port)/s.bin?token="
        try mount([base + stale])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/s.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)
        _ = try makeOlderCache(url: base + stale, identity: base + "***", token: stale)

        // The old token expired; the URL is given again with a new one, beside the older catalog's whole URL.
        try origin.accept(fresh)
        let before = origin.requests.count
        try mount([base + fresh])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/s.bin"), expected)
        let after = Array(origin.requests.dropFirst(before))
        XCTAssertFalse(after.contains { !$0.tokenRight }, "every request sent the token given: \(after)")
        XCTAssertFalse(after.contains { $0.range != "bytes=0-0" }, "the cached data was kept: \(after)")
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(try filesHolding(stale, under: cache).map(\.path), [], "the stale token is gone")
        XCTAssertEqual(try filesHolding(fresh, under: cache).map(\.path), ["credentials.json"])
    }

    func testAForegroundMountIsTheDaemonAndItsOwnArgvShowsNoToken() throws {
        let secret = "q-SECRET-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let origin = try startTokenOrigin(token: secret)
        defer { _ = origin.server.stop() }
        let expected = try serveRandom(origin, "fg.bin", size: 1 << 20)
        if mkdir(mountpoint, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(mountpoint)") }
        let daemon = try BackgroundProcess(driver.binary, ["mount", "-f", mountpoint,
                                                           "http://127.0.0.1:\(origin.port)/fg.bin?token=\(secret)",
                                                           "--cache", cache, "--header", "X-Key: \(secret)"],
                                           logPath: scratch.path + "/fg.log")
        defer { _ = daemon.stop(signal: SIGTERM, timeout: 20) }
        let deadline = Date().addingTimeInterval(60)
        while !driver.isMounted(mountpoint) {
            guard Date() < deadline, daemon.isRunning else {
                throw TestSupportError("no mount: " + ((try? String(contentsOfFile: scratch.path + "/fg.log",
                                                                          encoding: .utf8)) ?? ""))
            }
            usleep(20_000)
        }
        driver.record(mountpoint)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/fg.bin"), expected)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(daemon.pid)/cmdline"))
        let shown = String(decoding: bytes.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        XCTAssertFalse(shown.contains(secret), "the foreground daemon's argv: \(shown)")
        XCTAssertTrue(shown.contains("/fg.bin?token=***") && shown.contains("--header ***"), shown)
        let status = daemon.stop(signal: SIGTERM, timeout: 20)
        XCTAssertEqual(status.map { ($0 >> 8) & 0xff }, 0, "a clean exit after SIGTERM")
        XCTAssertFalse(driver.isMounted(mountpoint))
    }
}
