import Foundation
import Glibc
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 45, case 14: the rough edges a new user met, one test each: `unmount` of what is not mounted, a mount
/// point that holds files, `status --all`'s last line, `status --json`'s pid and rate, bash completion of paths,
/// `mount --help`'s sources, and `man rangefs`.
final class RoughEdgeTests: MountTestCase {
    func testUnmountOfWhatIsNotMountedSaysSoInWords() throws {
        let folder = scratch.path + "/not-mounted"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let result = try driver.run(["unmount", folder])
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr, "rangefs: cannot unmount \(folder): nothing is mounted there; "
                       + "findmnt -t fuse.rangefs lists the rangefs mounts\n")
        XCTAssertFalse(result.stderr.contains("Invalid argument"), result.stderr)
        let missing = try driver.run(["unmount", scratch.path + "/nowhere"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.stderr, "rangefs: cannot unmount \(scratch.path)/nowhere: it does not exist\n")
    }

    func testAMountPointHoldingFilesIsRefusedUnlessNonempty() throws {
        let expected = try origin.serveRandomFile("edge14.bin", size: 64 << 10)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: mountpoint + "/notes.txt"))
        let refused = try driver.mount(mountpoint, urls: [origin.url("edge14.bin")], cache: cache)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertFalse(driver.isMounted(mountpoint))
        let lines = problemLines(refused.stderr)
        XCTAssertEqual(lines.count, 1, refused.stderr)
        XCTAssertTrue(lines.first?.contains("is not empty (it holds 'notes.txt')") == true, refused.stderr)
        XCTAssertTrue(lines.first?.contains("--nonempty") == true, refused.stderr)

        try mount([origin.url("edge14.bin")], extra: ["--nonempty"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/edge14.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(try String(contentsOfFile: mountpoint + "/notes.txt", encoding: .utf8), "mine\n")
    }

    func testStatusAllDoesNotPointAtItselfAndJSONNamesTheDaemonAndTheRate() throws {
        // Under /listed/, nginx lists the folder (autoindex).
        try FileManager.default.createDirectory(atPath: origin.path("listed/edge14"), withIntermediateDirectories: true)
        for name in ["a.bin", "b.bin", "c.bin"] { try origin.serveRandomFile("listed/edge14/" + name, size: 16 << 10) }
        try mount([origin.url("listed/edge14/")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).count, 3)
        let plain = try driver.run(["status", "--mount", mountpoint])
        XCTAssertTrue(plain.stdout.contains("(3 complete or untouched files not shown; rangefs status --all shows them)"),
                      plain.stdout)
        let all = try driver.run(["status", "--all", "--mount", mountpoint])
        XCTAssertEqual(all.status, 0, all.stderr)
        XCTAssertFalse(all.stdout.contains("--all"), "status --all points at itself: \(all.stdout)")
        XCTAssertTrue(all.stdout.contains("(3 files of listings not shown: none of their bytes is cached yet)"),
                      all.stdout)

        let json = try statusJSON()
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        XCTAssertEqual(json["pid"] as? Int, Int(pid), "status --json names the daemon: \(json)")
        let totals = try XCTUnwrap(json["totals"] as? [String: Any])
        XCTAssertNotNil(totals["bytes_per_second"] as? Int, "\(totals)")
    }

    /// A one-shot `status` during a copy at a steady 12 MiB/s shows its pace. With the fill off (`--prefetch
    /// none`), what is fetched is what readahead fetches ahead of the reader: in bursts, as its window refills, so
    /// a one-shot status, which sampled the stored bytes over 250 ms, showed a burst (64 MiB/s for a copy at 16)
    /// or nothing (0). Each `status` here is a one-shot: 5.5 s apart, past the 5 s an earlier sample was kept.
    func testAOneShotStatusShowsThePaceOfACopy() throws {
        let size = 256 << 20
        _ = try origin.serveRandomFile("paced14.bin", size: size)
        try mount([origin.url("paced14.bin")], extra: ["--prefetch", "none"])
        let stop = LockedBox(false)
        let reader = Thread {
            guard let handle = FileHandle(forReadingAtPath: self.mountpoint + "/paced14.bin") else { return }
            let start = Date()
            var done = 0
            while done < size && !stop.withLock({ $0 }) {
                let chunk = handle.readData(ofLength: 256 << 10)
                if chunk.isEmpty { break }
                done += chunk.count
                let due = Double(done) / (12.0 * 1048576), elapsed = Date().timeIntervalSince(start)
                if due > elapsed { usleep(useconds_t((due - elapsed) * 1e6)) }
            }
        }
        reader.start()
        defer {
            stop.withLock { $0 = true }
            while !reader.isFinished { usleep(20_000) }
        }
        /// The file's cached bytes and shown speed, from a one-shot `status --json`.
        func sample() throws -> (time: Double, cached: Double, speed: Double) {
            let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
            let file = files.first { ($0["name"] as? String) == "paced14.bin" } ?? [:]
            return (Date().timeIntervalSince1970, file["cached_bytes"] as? Double ?? 0,
                    file["bytes_per_second"] as? Double ?? 0)
        }
        sleep(2)
        var seen: [String] = []
        var before = try sample()
        // The copy lasts 21 s at 12 MiB/s, past the last sample.
        for round in 0..<3 {
            usleep(5_500_000)
            let now = try sample()
            let pace = (now.cached - before.cached) / (now.time - before.time)
            seen.append(String(format: "status %.1f MiB/s, cached bytes grew %.1f MiB/s", now.speed / 1048576,
                               pace / 1048576))
            XCTAssertTrue(now.speed >= pace * 0.5 && now.speed <= pace * 2, "round \(round): \(seen)")
            before = now
        }
        print("paced copy: \(seen)")
    }

    func testBashCompletesPathsForMountPointsAndCacheFolders() throws {
        let script = scratch.path + "/rangefs.bash"
        let generated = try driver.run(["--generate-completion-script", "bash"])
        try generated.stdout.write(toFile: script, atomically: true, encoding: .utf8)
        let folder = scratch.path + "/complete"
        for name in ["mnt/tree-one", "mnt/tree-two", "mnt/other"] {
            try FileManager.default.createDirectory(atPath: folder + "/" + name, withIntermediateDirectories: true)
        }
        /// What bash offers for the last word of `words`.
        func offered(_ words: [String]) throws -> [String] {
            let line = words.joined(separator: " ")
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let result = try Shell.run("/bin/bash", ["-c", """
                cd '\(folder)' && source '\(script)'
                COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
                _rangefs rangefs '\(words.last!)' '\(words[words.count - 2])'
                printf '%s\\n' "${COMPREPLY[@]}"
                """])
            return result.stdout.split(separator: "\n").map(String.init).sorted()
        }
        XCTAssertEqual(try offered(["rangefs", "unmount", "mnt/tre"]), ["mnt/tree-one", "mnt/tree-two"])
        XCTAssertEqual(try offered(["rangefs", "mount", "mnt/o"]), ["mnt/other"])
        XCTAssertEqual(try offered(["rangefs", "status", "--mount", "mnt/tree-t"]), ["mnt/tree-two"])
        XCTAssertEqual(try offered(["rangefs", "mount", "--cache", "mnt/oth"]), ["mnt/other"])
    }

    func testMountHelpNamesEveryKindOfSource() throws {
        let help = try driver.run(["mount", "--help"])
        for kind in ["http(s)://HOST/FILE", "http(s)://HOST/DIR/", "s3://BUCKET/KEY", "s3://BUCKET/PREFIX/",
                     "gs://BUCKET/PREFIX/", "--nonempty"] {
            XCTAssertTrue(help.stdout.replacingOccurrences(of: "\n", with: " ").contains(kind), "\(kind): \(help.stdout)")
        }
    }

    /// The page `man rangefs` shows (mount-scripts/debian/rangefs.1; the package installs it): examples of each
    /// kind of mount and a SEE ALSO, and a whatis line (`man -k`) without stray quotes.
    func testTheManualPageHasExamplesAndACleanWhatisLine() throws {
        let page = repositoryRoot() + "/mount-scripts/debian/rangefs.1"
        let whatis = try Shell.run("/usr/bin/lexgrog", [page])
        XCTAssertEqual(whatis.stdout, "\(page): \"rangefs - mount HTTP(S) URLs, web directories and S3 buckets as local "
                       + "files, cached block by block\"\n")
        let rendered = try Shell.run("/usr/bin/env", ["MANWIDTH=200", "/usr/bin/man", "-l", page])
        XCTAssertEqual(rendered.status, 0, rendered.stderr)
        let text = rendered.stdout
        for part in ["EXAMPLES", "SEE ALSO", "rangefs.mount(1)", "mount.fuse.rangefs(8)", "https://cdimage.debian.org",
                     "s3://my-bucket/", "--list ~/media.list", "fuse.rangefs cache=", "Offline: remount the same cache"] {
            XCTAssertTrue(text.contains(part), "\(part) is not in man rangefs")
        }
        let lint = try Shell.run("/usr/bin/groff", ["-ww", "-z", "-man", page])
        XCTAssertEqual(lint.stderr, "", "groff warns")
    }
}
