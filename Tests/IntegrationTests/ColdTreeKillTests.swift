import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 46, acceptance 6: `kill -9` of the daemon during a cold read of 3,000 small files, ten times, then a
/// remount: every file reads right, and the origin is asked only for the files the cache did not hold whole.
///
/// A guard for changes of the cache's on-disk format: the test looks at the cache only through the mount
/// (`user.rangefs.cached_bytes`) and `rangefs verify`, never through names inside the cache directory, so it
/// holds for any layout that keeps the promise.
final class ColdTreeKillTests: MountTestCase {
    /// Serves `count` files of 1–60 KB of pseudo-random bytes (sizes and bytes from fixed seeds) in the
    /// HTML-listed folder `listed/<folder>`; returns name → (size, sha256).
    func serveSmallTree(_ folder: String, count: Int) throws -> [String: (size: Int, digest: String)] {
        try FileManager.default.createDirectory(atPath: origin.path("listed/\(folder)"), withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 46)
        // Each file is a window of one seeded pool at its own offset: as random as 90 MB drawn one by one, and
        // made in a second where a debug build draws 90 MB in ten.
        let pool = pseudoRandomBytes(count: 4 << 20, seed: 46)
        var sizes: [String: Int] = [:]
        for index in 0..<count {
            let name = String(format: "f%04d.bin", index)
            let size = Int.random(in: 1_000...60_000, using: &generator)
            let start = Int.random(in: 0...(pool.count - size), using: &generator)
            try origin.serve("listed/\(folder)/\(name)", bytes: Array(pool[start..<(start + size)]))
            sizes[name] = size
        }
        // One sha256sum for all: far quicker than hashing 90 MB in a debug build.
        let summed = try Shell.run("/bin/sh", ["-c", "cd \"$1\" && sha256sum -- *", "sh", origin.path("listed/\(folder)")])
        XCTAssertEqual(summed.status, 0, summed.stderr)
        var files: [String: (size: Int, digest: String)] = [:]
        for (name, digest) in readDigests(text: summed.stdout) { files[name] = (sizes[name] ?? -1, digest) }
        XCTAssertEqual(files.count, count)
        return files
    }

    /// Starts `sha256sum` of every file of the mount in listing order, in one pipeline as a user's
    /// `ls | xargs cat` would; each line ("digest  name") is written as soon as its file was read whole.
    func startTreeRead(into progress: String) throws -> BackgroundProcess {
        try BackgroundProcess("/bin/sh", ["-c", "cd \"$1\" && ls | xargs -d '\\n' stdbuf -oL sha256sum -- > \"$2\"",
                                          "sh", mountpoint, progress], logPath: progress + ".stderr")
    }

    /// The (name, digest) pairs of the whole lines of a `sha256sum` output file.
    func readDigests(_ path: String) -> [(name: String, digest: String)] {
        readDigests(text: (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    /// The (name, digest) pairs of the whole lines of `sha256sum` output.
    func readDigests(text: String) -> [(name: String, digest: String)] {
        // A line without its newline may be cut short by the kill.
        return text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
            .compactMap { line in
                let fields = line.split(separator: " ", maxSplits: 1)
                guard fields.count == 2 else { return nil }
                return (String(fields[1].drop { $0 == " " || $0 == "*" }), String(fields[0]))
            }
    }

    /// name → `user.rangefs.cached_bytes` of every file of the mount, from one getfattr over them all (what the
    /// mount says it holds, whatever the cache's layout).
    func cachedBytesOfEveryFile() throws -> [String: Int] {
        let result = try Shell.run("/bin/sh", ["-c", "cd \"$1\" && ls | xargs -d '\\n' getfattr -n user.rangefs.cached_bytes --",
                                               "sh", mountpoint], timeout: 300)
        XCTAssertEqual(result.status, 0, result.stderr)
        var cached: [String: Int] = [:], file: String?
        for line in result.stdout.split(separator: "\n") {
            if line.hasPrefix("# file: ") {
                file = String(line.dropFirst("# file: ".count))
            } else if let name = file, line.hasPrefix("user.rangefs.cached_bytes=") {
                cached[name] = Int(line.dropFirst("user.rangefs.cached_bytes=".count).filter(\.isNumber))
            }
        }
        return cached
    }

    /// Newlines in the file at `path` so far.
    func lineCount(_ path: String) -> Int {
        (FileManager.default.contents(atPath: path) ?? Data()).reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }

    func testTenKillsDuringAColdReadOf3000SmallFilesThenEveryFileReadsRight() throws {
        let started = Date()
        let count = 3000
        let files = try serveSmallTree("crash46", count: count)
        let url = origin.url("listed/crash46/")
        let prefix = "/listed/crash46/"
        print("3,000 files of 1-60 KB served in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")

        // The kill comes once the reader got through a number of files that depends on the round, not after a
        // time: each round reads again what the last kept (fast, from the cache) and is killed further on, in
        // files still cold, as a user who starts the same copy again would be.
        let killPoints = [120, 430, 700, 1010, 1290, 1620, 1880, 2210, 2480, 2790]
        var readBeforeKills = 0, wrongDuringKills: [String] = []
        for (round, killAt) in killPoints.enumerated() {
            let daemon = try startForeground([url])
            let progress = scratch.path + "/round\(round).sha256"
            let reader = try startTreeRead(into: progress)
            let deadline = Date().addingTimeInterval(120)
            while reader.isRunning, Date() < deadline, lineCount(progress) < killAt { usleep(2_000) }
            daemon.stop(signal: SIGKILL)
            XCTAssertNotNil(reader.waitForExit(timeout: 60), "the reader hangs after the daemon died (round \(round))")
            XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)
            // What the reader got before the kill is the origin's, byte for byte.
            let read = readDigests(progress)
            XCTAssertGreaterThanOrEqual(read.count, killAt, "round \(round) ended before its kill point: "
                + ((try? String(contentsOfFile: progress + ".stderr", encoding: .utf8)) ?? ""))
            XCTAssertLessThan(read.count, count, "round \(round): the read finished before the kill")
            wrongDuringKills += read.filter { files[$0.name]?.digest != $0.digest }.map(\.name)
            readBeforeKills = max(readBeforeKills, read.count)
        }
        XCTAssertEqual(wrongDuringKills, [], "files read wrong before a kill")

        // The cache the kills left passes its own check: no block fails its CRC, no entry is damaged.
        try driver.waitForUnlock(cache)
        let verified = try driver.run(["verify", "--cache", cache], timeout: 300)
        let problems = verified.stdout.split(separator: "\n").filter { $0.hasPrefix("BAD") || $0.hasPrefix("DAMAGED") }
        XCTAssertEqual(problems, [], "verify after 10 kills")
        XCTAssertEqual(verified.status, 0, verified.stderr)

        // The last remount: which files the cache holds whole, as the mount reports it (the format's own business).
        try mount([url])
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted()
        XCTAssertEqual(names.count, count)
        let cachedBytes = try cachedBytesOfEveryFile()
        XCTAssertEqual(cachedBytes.count, count, "user.rangefs.cached_bytes of every file")
        let complete = Set(cachedBytes.filter { $0.value == files[$0.key]?.size }.keys)
        let partial = cachedBytes.filter { $0.value > 0 && !complete.contains($0.key) }.count
        origin.clearAccessLog()
        let progress = scratch.path + "/final.sha256"
        let reader = try startTreeRead(into: progress)
        XCTAssertNotNil(reader.waitForExit(timeout: 300), "the last read did not finish")
        let read = readDigests(progress)
        XCTAssertEqual(read.count, count, (try? String(contentsOfFile: progress + ".stderr", encoding: .utf8)) ?? "")
        XCTAssertEqual(read.filter { files[$0.name]?.digest != $0.digest }.map(\.name), [], "files read wrong after the kills")

        // Data the origin sent (its own log; a one-byte check of a cached file is no data): nothing for a file the
        // cache held whole, and at most its size for one it did not.
        var sentPerFile: [String: UInt64] = [:]
        for line in origin.accessLog() where line.path.hasPrefix(prefix) && line.path != prefix && line.range != "bytes=0-0" {
            sentPerFile[String(line.path.dropFirst(prefix.count)), default: 0] += line.bodyBytes
        }
        let refetchedWhole = sentPerFile.filter { complete.contains($0.key) && $0.value > 0 }
        XCTAssertEqual(refetchedWhole.count, 0, "files the cache held whole were fetched again: \(refetchedWhole.keys.sorted().prefix(5))")
        let twice = sentPerFile.filter { $0.value > UInt64(files[$0.key]?.size ?? 0) }
        XCTAssertEqual(twice.count, 0, "files fetched more than once: \(twice.keys.sorted().prefix(5))")
        XCTAssertGreaterThan(complete.count, 0, "the kills left nothing in the cache")
        print("10 kills during a cold read of \(count) small files: the readers got up to \(readBeforeKills) files "
              + "before a kill; the cache then held \(complete.count) whole and \(partial) in part; the last read "
              + "fetched \(sentPerFile.count) files (\(sentPerFile.values.reduce(0, +)) bytes); "
              + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s in all")
        try driver.unmount(mountpoint, cache: cache)
    }
}
