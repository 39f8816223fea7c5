import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 25: a new user's first hour with a mounted tree. Progress is right from the first `stat` after a remount,
/// a directory that cannot be listed says so where the user looks, the log can always be found, every message is
/// true, and `status` reads well for a tree. Real nginx (HTML listings), real mounts, default options.
final class FirstHourTests: MountTestCase {
    var tree: String { origin.root + "/listed" }

    /// Makes the HTML-listed tree `/listed/` hold exactly `files` (relative path -> size); returns their digests.
    @discardableResult
    func makeTree(_ files: [String: Int]) throws -> [String: String] {
        try? FileManager.default.removeItem(atPath: tree)
        var digests: [String: String] = [:]
        for (path, size) in files {
            let full = tree + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            let bytes = size > 1 << 20 ? Data(repeating: UInt8(size % 251), count: size)
                : Data(pseudoRandomBytes(count: size, seed: UInt64(size)))
            try bytes.write(to: URL(fileURLWithPath: full))
            digests[path] = try Shell.sha256(of: full)
        }
        return digests
    }

    func cachedBytesAttribute(_ path: String) throws -> UInt64? {
        let result = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.cached_bytes", path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return UInt64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    // 1. A file of a mounted directory, partly cached, then unmounted and mounted again with no URLs: du,
    //    st_blocks, getfattr and status show its cached bytes before any open, and nginx sees no request for it.
    func testARemountShowsWhatIsCachedOfListedFilesBeforeAnyOpen() throws {
        try makeTree(["movies/film.bin": 96 << 20, "notes.txt": 2000])
        try mount([origin.url("listed/")])
        let film = mountpoint + "/movies/film.bin"
        _ = try pread(film, offset: 0, count: 1 << 20)
        // What the readahead brings, once it has settled.
        var cachedBefore = try XCTUnwrap(try cachedBytesAttribute(film))
        for _ in 0..<50 {
            usleep(200_000)
            let now = try XCTUnwrap(try cachedBytesAttribute(film))
            if now == cachedBefore { break }
            cachedBefore = now
        }
        XCTAssertGreaterThanOrEqual(cachedBefore, 1 << 20)
        XCTAssertLessThan(cachedBefore, 96 << 20, "a part of the file")
        try driver.unmount(mountpoint, cache: cache)

        origin.clearAccessLog()
        try mount([])  // the saved set: the directory URL
        let du = try Shell.run("/usr/bin/du", ["-k", "--apparent-size", "-s", film])
        XCTAssertEqual(du.status, 0, du.stderr)
        let blocksDu = try Shell.run("/usr/bin/du", ["-k", film])
        let duKiB = UInt64(blocksDu.stdout.split(separator: "\t").first ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(duKiB * 1024, cachedBefore, "du counts the cached bytes: \(blocksDu.stdout)")
        XCTAssertGreaterThanOrEqual(UInt64(try statFile(film).st_blocks) * 512, cachedBefore, "st_blocks")
        XCTAssertEqual(try cachedBytesAttribute(film), cachedBefore, "the xattr")
        let state = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.state", film])
        XCTAssertEqual(state.stdout, "partial")
        let status = try statusJSON()
        let totals = try XCTUnwrap(status["totals"] as? [String: Any])
        XCTAssertEqual((totals["cached_bytes"] as? NSNumber)?.uint64Value, cachedBefore, "status totals: \(totals)")
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        let shown = try XCTUnwrap(files.first { $0["name"] as? String == "movies/film.bin" }, "\(files)")
        XCTAssertEqual(shown["state"] as? String, "partial")
        XCTAssertEqual((shown["cached_bytes"] as? NSNumber)?.uint64Value, cachedBefore)
        let text = try driver.run(["status", "--mount", mountpoint])
        XCTAssertTrue(text.stdout.contains("movies/film.bin"), "a partial file shows by default: \(text.stdout)")
        let requests = origin.accessLog()
        XCTAssertFalse(requests.contains { $0.path.hasSuffix("film.bin") }, "no request for the file: \(requests)")
        XCTAssertLessThanOrEqual(requests.count, 2, "at most the two listings: \(requests.map(\.path))")
    }

    // 2. A directory URL that answers 404, and one whose server is down with nothing cached: one line naming the
    //    URL and the reason, exit 1. With a good URL beside it, exit 2.
    func testADirectoryThatCannotBeListedIsNamedAtMount() throws {
        try makeTree(["a.bin": 1000])
        try origin.serve("good.bin", bytes: [1, 2, 3])
        for (url, reason) in [(origin.url("nodir/"), "404"), ("http://127.0.0.1:1/pub/", "connection refused")] {
            let result = try driver.mount(mountpoint, urls: [url], cache: cache)
            XCTAssertEqual(result.status, 1, result.stderr)
            let lines = problemLines(result.stderr)
            XCTAssertEqual(lines.count, 1, "one line: \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(url) && result.stderr.contains(reason), result.stderr)
            XCTAssertFalse(result.stderr.contains("?;"), result.stderr)
            XCTAssertFalse(result.stderr.contains("kept in this cache"), "nothing was saved: \(result.stderr)")
            XCTAssertFalse(driver.isMounted(mountpoint))
        }
        let beside = try mount([origin.url("nodir/"), origin.url("good.bin")], expectStatus: 2)
        XCTAssertEqual(problemLines(beside.stderr).count, 1, beside.stderr)
        XCTAssertTrue(beside.stderr.contains(origin.url("nodir/")) && beside.stderr.contains("404"), beside.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["good.bin"])
    }

    // 2b. A listing kept from an earlier visit mounts while the server is down, with one line saying so.
    func testACachedListingMountsWhileItsServerIsDown() throws {
        try makeTree(["a.bin": 1000, "b.bin": 2000])
        try mount([origin.url("listed/")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["a.bin", "b.bin"])
        try driver.unmount(mountpoint, cache: cache)
        origin.halt()
        defer { XCTAssertNoThrow(try origin.resume()) }
        let result = try mount([origin.url("listed/")])
        XCTAssertEqual(problemLines(result.stderr).count, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains(origin.url("listed/")) && result.stderr.contains("kept from an earlier visit"),
                      result.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["a.bin", "b.bin"])
    }

    // 2c. A subdirectory that fails to list later: `ls` fails with EIO, not an empty directory, and status shows
    //     it as an error with the reason, and the error among the mount's recent ones.
    func testASubdirectoryThatCannotBeListedFailsWithEIOAndShowsInStatus() throws {
        try makeTree(["sub/x.bin": 1000, "top.bin": 500])
        try mount([origin.url("listed/")])
        try FileManager.default.removeItem(atPath: tree + "/sub")  // listed by the parent, gone on the server
        let listed = try Shell.run("/bin/ls", [mountpoint + "/sub"])
        XCTAssertNotEqual(listed.status, 0, "not an empty directory: \(listed.stdout)")
        XCTAssertTrue(listed.stderr.contains("Input/output error"), listed.stderr)
        let status = try statusJSON()
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        let sub = try XCTUnwrap(files.first { $0["name"] as? String == "sub/" }, "\(files)")
        XCTAssertEqual(sub["state"] as? String, "error")
        XCTAssertTrue((sub["last_error"] as? String)?.contains("404") ?? false, "\(sub)")
        let recent = try XCTUnwrap(status["recent_errors"] as? [[String: Any]])
        XCTAssertTrue(recent.contains { ($0["message"] as? String)?.contains("cannot list") ?? false }, "\(recent)")
        let text = try driver.run(["status", "--mount", mountpoint])
        XCTAssertTrue(text.stdout.contains("recent errors"), text.stdout)
    }

    // 3. With syslog unreachable (/dev/log hidden in a mount namespace), the daemon logs to a file in the cache
    //    directory and the mount names it.
    func testWithoutSyslogTheLogIsAFileInTheCacheDirectory() throws {
        try makeTree(["sub/x.bin": 1000])
        XCTAssertEqual(mkdir(mountpoint, 0o755), 0)
        let script = """
            set -u
            if [ -e /dev/log ]; then mount --bind /dev/null /dev/log; fi
            trap 'fusermount3 -uz "$2" 2>/dev/null' EXIT
            "$1" mount "$2" "$3" --cache "$4"
            echo "exit=$?" >&2
            rm -rf "$5"
            ls "$2/sub" >/dev/null 2>&1
            "$1" status --mount "$2"
            fusermount3 -u "$2"
            """
        let result = try Shell.run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script,
                                                        "sh", driver.binary, mountpoint, origin.url("listed/"), cache,
                                                        tree + "/sub"], timeout: 120)
        let logFile = cache + "/rangefs.log"
        XCTAssertTrue(result.stderr.contains("exit=0"), result.stderr)
        XCTAssertTrue(result.stderr.contains("rangefs: logging to \(logFile)"), "the mount names the log file: \(result.stderr)")
        let log = try String(contentsOfFile: logFile, encoding: .utf8)
        XCTAssertTrue(log.contains("cannot list"), log)
        XCTAssertTrue(result.stdout.contains("cannot list"), "status shows the last errors: \(result.stdout)")
        try driver.waitForUnlock(cache)
    }

    // 4. `pgrep -x rangefs` finds the daemon; with two mounts, status's hint names an option it takes, and the
    //    hinted command works.
    func testTheDaemonIsCalledRangefsAndTheStatusHintWorks() throws {
        try makeTree(["a.bin": 1000])
        try mount([origin.url("listed/")])
        let second = scratch.path + "/mnt2", secondCache = scratch.path + "/cache2"
        let mounted = try driver.mount(second, urls: [origin.url("listed/a.bin")], cache: secondCache)
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        defer {
            try? driver.unmount(second, cache: secondCache)
        }
        let pids = try Shell.run("/usr/bin/pgrep", ["-x", "rangefs"]).stdout.split(separator: "\n").compactMap { pid_t($0) }
        for daemon in [driver.daemonPID(cache: cache), driver.daemonPID(cache: secondCache)] {
            XCTAssertTrue(pids.contains(try XCTUnwrap(daemon)), "pgrep -x rangefs: \(pids)")
        }
        let ambiguous = try driver.run(["status"])
        XCTAssertEqual(ambiguous.status, 1)
        let hint = try XCTUnwrap(ambiguous.stderr.range(of: "e.g. rangefs "), ambiguous.stderr)
        let command = ambiguous.stderr[hint.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines)
        let hinted = try driver.run(command.split(separator: " ").map(String.init))
        XCTAssertEqual(hinted.status, 0, "the hinted command works: rangefs \(command): \(hinted.stderr)")
        XCTAssertTrue(hinted.stdout.contains("total:"), hinted.stdout)
    }

    // 6. Status of a tree: sorted by path, totals first, and names that share 40 leading characters stay apart.
    func testStatusOfATreeIsSortedAndKeepsLongNamesApart() throws {
        let pack = "repo.git/objects/pack/pack-96515f30aa4c1d2e3f4a5b6c7d8e9f0a1b2c3d4e"
        try makeTree([pack + ".pack": 3000, pack + ".idx": 2000, pack + ".bitmap": 1000, "b/z.bin": 100,
                      "a.bin": 100, "repo.git/HEAD": 23])
        try mount([origin.url("listed/")])
        XCTAssertEqual(try Shell.run("/usr/bin/find", [mountpoint, "-type", "f", "-exec", "cat", "{}", "+"]).status, 0)
        let text = try driver.run(["status", "--mount", mountpoint, "--all"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.count > 2 && lines[1].hasPrefix("total: 6 files"), "totals first: \(text.stdout)")
        let rows = lines.filter { $0.contains(" complete ") && $0.contains("[") }
        XCTAssertEqual(rows.count, 6, text.stdout)
        let names = rows.map { String($0.split(separator: " ")[0]) }
        XCTAssertEqual(Set(names).count, 6, "every name tells its file apart: \(names)")
        // Row i shows the i-th path in order, whole or cut in the middle ("start…end").
        let paths = [pack + ".bitmap", pack + ".idx", pack + ".pack", "b/z.bin", "a.bin", "repo.git/HEAD"].sorted()
        for (name, path) in zip(names, paths) {
            let parts = name.split(separator: "…", omittingEmptySubsequences: false).map(String.init)
            XCTAssertTrue(parts.count == 1 ? name == path : path.hasPrefix(parts[0]) && path.hasSuffix(parts[1]),
                          "\(name) is not \(path): rows are in path order")
        }
        for suffix in [".pack", ".idx", ".bitmap"] {
            XCTAssertTrue(names.contains { $0.hasSuffix(suffix) }, "\(suffix) keeps its end: \(names)")
        }
    }

    // 5. `rsync -a` of a 300-file tree from an nginx HTML listing sends at most (directories + files + 5) requests,
    //    and a second `rsync -a` transfers no file. After a remount, `du -s` of the tree sends at most one request
    //    per directory and none per file.
    func testRsyncOfATreeCostsOneRequestPerFileAndARemountNoneForDu() throws {
        var files: [String: Int] = [:]
        for index in 0..<300 {
            let folder = index % 4 == 0 ? "" : "d\(index % 5)/" + (index % 3 == 0 ? "e\(index % 4)/" : "")
            files[folder + "f\(index).bin"] = 100 + index * 677 % 200_000
        }
        let digests = try makeTree(files)
        let directories = Set(files.keys.map { ($0 as NSString).deletingLastPathComponent }).union([""]).count
        try mount([origin.url("listed/")])
        origin.clearAccessLog()
        let copy = scratch.path + "/copy"
        let first = try Shell.run("/usr/bin/rsync", ["-a", mountpoint + "/", copy + "/"], timeout: 300)
        XCTAssertEqual(first.status, 0, first.stderr)
        for (path, digest) in digests { XCTAssertEqual(try Shell.sha256(of: copy + "/" + path), digest, path) }
        let requests = origin.accessLog().filter { $0.path.hasPrefix("/listed/") }
        XCTAssertLessThanOrEqual(requests.count, directories + files.count + 5,
                                 "\(requests.count) requests for \(directories) directories and \(files.count) files")

        origin.clearAccessLog()
        let second = try Shell.run("/usr/bin/rsync", ["-a", "--stats", mountpoint + "/", copy + "/"], timeout: 300)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertTrue(second.stdout.contains("Number of regular files transferred: 0"), second.stdout)
        XCTAssertFalse(origin.accessLog().contains { $0.path.hasSuffix(".bin") }, "no file was read again")

        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        origin.clearAccessLog()
        let du = try Shell.run("/usr/bin/du", ["-s", mountpoint])
        XCTAssertEqual(du.status, 0, du.stderr)
        let afterRemount = origin.accessLog()
        XCTAssertFalse(afterRemount.contains { $0.path.hasSuffix(".bin") }, "no request per file: \(afterRemount.map(\.path))")
        XCTAssertLessThanOrEqual(afterRemount.count, directories, "at most one listing per directory")
        let total = files.values.reduce(0, +)
        let kib = UInt64(du.stdout.split(separator: "\t").first ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(kib * 1024, UInt64(total), "du shows the cached tree: \(du.stdout)")
    }
}
