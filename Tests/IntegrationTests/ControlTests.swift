import Foundation
import Glibc
@testable import RangeFSCache
@testable import RangeFSControl
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 5's control channel: status, add, rm, pause/resume, live verify, and the saved set of files.
final class ControlTests: MountTestCase {
    func control(_ arguments: [String]) throws -> ProcessResult {
        try driver.run(arguments + ["--mount", mountpoint])
    }

    func file(_ name: String, in status: [String: Any]) throws -> [String: Any] {
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        return try XCTUnwrap(files.first { $0["name"] as? String == name }, "no \(name) in \(files)")
    }

    // 1. add makes a file visible and readable at once, and it is still there after a restart. "At once" is an
    //    order, not a clock: `add` answers only when the file is in the catalog, so the lookup made right after
    //    its answer finds it, with no wait or retry, and reads it whole.
    func testAddedFileIsReadableAtOnceAndSurvivesARestart() throws {
        let first = try origin.serveRandomFile("first.bin", size: 1 << 20)
        let later = try origin.serveRandomFile("later.bin", size: 3 << 20)
        try mount([origin.url("first.bin")], extra: ["--prefetch", "none"])
        let added = try control(["add", origin.url("later.bin"), "--name", "added.bin"])
        XCTAssertEqual(added.status, 0, added.stderr)
        var found = stat()
        XCTAssertEqual(stat(mountpoint + "/added.bin", &found), 0, "the first lookup after add's answer found it")
        XCTAssertEqual(found.st_size, off_t(3 << 20))
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/added.bin"), later)

        try driver.unmount(mountpoint, cache: cache)
        try mount([], extra: ["--prefetch", "none"])  // no URLs: the cache remembers both files
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["added.bin", "first.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/first.bin"), first)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/added.bin"), later)
    }

    /// Issue 39: `df` (statfs) answers from totals the catalog keeps, and they follow files added and removed at
    /// runtime: the files plus the root, and their sizes added up in 4 KiB blocks.
    func testStatfsFollowsTheFilesAddedAndRemoved() throws {
        try origin.serveRandomFile("keep.bin", size: 1 << 20)
        try origin.serveRandomFile("drop.bin", size: (1 << 20) + 100)
        try origin.serveRandomFile("later.bin", size: 3 << 20)
        try mount([origin.url("keep.bin"), origin.url("drop.bin")], extra: ["--prefetch", "none"])
        func totals() throws -> (files: UInt64, bytes: UInt64) {
            var info = statvfs()
            guard statvfs(mountpoint, &info) == 0 else { throw TestSupportError("statvfs \(mountpoint)") }
            return (UInt64(info.f_files), UInt64(info.f_blocks) * UInt64(info.f_frsize))
        }
        XCTAssertEqual(try totals().files, 3)
        XCTAssertEqual(try totals().bytes, (1 << 20) + (1 << 20) + 4096)
        XCTAssertEqual(try control(["add", origin.url("later.bin")]).status, 0)
        XCTAssertEqual(try totals().files, 4)
        XCTAssertEqual(try totals().bytes, (5 << 20) + 4096)
        XCTAssertEqual(try control(["rm", "drop.bin"]).status, 0)
        XCTAssertEqual(try totals().files, 3)
        XCTAssertEqual(try totals().bytes, 4 << 20)
    }

    func testRemovedFileDisappearsAndStaysGone() throws {
        try origin.serveRandomFile("keep.bin", size: 1 << 20)
        try origin.serveRandomFile("drop.bin", size: 1 << 20)
        try mount([origin.url("keep.bin"), origin.url("drop.bin")], extra: ["--prefetch", "none"])
        XCTAssertEqual(try control(["rm", "drop.bin"]).status, 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["keep.bin"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: mountpoint + "/drop.bin"))
        let missing = try control(["rm", "nothing.bin"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("no file named 'nothing.bin'"), missing.stderr)
        try driver.unmount(mountpoint, cache: cache)
        try mount([], extra: ["--prefetch", "none"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["keep.bin"])
    }

    // 2. status --json reports cached_bytes that agree with st_blocks and with the bitmap.
    func testStatusAgreesWithStBlocksAndTheBitmap() throws {
        try origin.serveRandomFile("partial.bin", size: 16 << 20)
        try mount([origin.url("partial.bin")], extra: ["--prefetch", "none"])
        let path = mountpoint + "/partial.bin"
        for offset in [1 << 20, 7 << 20, 12 << 20] { _ = try pread(path, offset: offset, count: 4096) }
        let entry = try file("partial.bin", in: try statusJSON())
        let cached = try XCTUnwrap(entry["cached_bytes"] as? UInt64)
        XCTAssertGreaterThan(cached, 0)
        XCTAssertEqual(UInt64(try statFile(path).st_blocks) * 512, cached)
        XCTAssertEqual(entry["state"] as? String, "partial")
        XCTAssertEqual((entry["map"] as? String)?.count, ControlService.mapWidth)
        try driver.unmount(mountpoint, cache: cache)
        let stored = try CacheStore(root: cache, logger: .init(label: "test")).storedEntry(for: origin.url("partial.bin"))
        XCTAssertEqual(UInt64(try XCTUnwrap(stored).present.setCount) * 65536, cached)
    }

    // 5. status is plain text when not on a terminal, and --json is JSON.
    func testStatusIsPlainTextOffATerminal() throws {
        try origin.serveRandomFile("plain.bin", size: 1 << 20)
        try mount([origin.url("plain.bin")], extra: ["--prefetch", "none"])
        let result = try driver.run(["status", mountpoint])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stdout.contains("\u{1B}"), "no escape codes when stdout is not a terminal")
        // Untouched, so left out by default; the totals count it, and --all shows it.
        XCTAssertFalse(result.stdout.contains("plain.bin"), result.stdout)
        XCTAssertTrue(result.stdout.contains("total: 1 files"), result.stdout)
        let all = try driver.run(["status", mountpoint, "--all"])
        XCTAssertTrue(all.stdout.contains("plain.bin") && all.stdout.contains("empty"), all.stdout)
        XCTAssertNotNil(try statusJSON()["files"])
    }

    // 3. pause stops origin traffic within 1 s; resume continues where it stopped, fetching no byte twice.
    func testPauseStopsTrafficAndResumeFetchesNothingTwice() throws {
        let faulty = try FaultOrigin()
        defer { faulty.stop() }
        let content = pseudoRandomBytes(count: 32 << 20, seed: 11)
        faulty.serve("slow.bin", bytes: content, etag: "\"p1\"")
        faulty.setFault(.throttle(1 << 20), for: "slow.bin")  // per response; fill runs 4 at once
        try mount([faulty.url("slow.bin")], extra: ["--prefetch", "all"])
        usleep(1_500_000)
        XCTAssertEqual(try control(["pause", "slow.bin"]).status, 0)
        usleep(1_000_000)
        // As an access log sees it: no request starts after the pause.
        let requestsAtPause = faulty.rangesRequested("slow.bin").count
        // The paused transfers stop reading, so the server stalls once the kernel's socket buffers are full.
        usleep(2_000_000)
        let stalled = faulty.bodyBytesSent("slow.bin")
        usleep(1_000_000)
        XCTAssertEqual(faulty.rangesRequested("slow.bin").count, requestsAtPause, "a request started after pause")
        XCTAssertLessThanOrEqual(faulty.bodyBytesSent("slow.bin") - stalled, 64 << 10, "the origin kept sending")
        XCTAssertEqual(try file("slow.bin", in: try statusJSON())["state"] as? String, "paused")

        faulty.setFault(.none, for: "slow.bin")
        XCTAssertEqual(try control(["resume", "slow.bin"]).status, 0)
        let deadline = Date().addingTimeInterval(60)
        while try file("slow.bin", in: try statusJSON())["state"] as? String != "complete" && Date() < deadline {
            usleep(100_000)
        }
        XCTAssertEqual(try file("slow.bin", in: try statusJSON())["state"] as? String, "complete")
        XCTAssertEqual(faulty.bodyBytesSent("slow.bin"), UInt64(content.count) + 1, "each byte once (+1: the probe)")
        let copy = scratch.path + "/slow.copy"
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/slow.bin", copy]).status, 0)
        XCTAssertEqual(try XCTUnwrap(FileManager.default.contents(atPath: copy)), Data(content))
    }

    func testLiveVerifyChecksAFile() throws {
        try origin.serveRandomFile("check.bin", size: 2 << 20)
        try mount([origin.url("check.bin")], extra: ["--prefetch", "none"])
        _ = try Shell.sha256(of: mountpoint + "/check.bin")
        let result = try control(["verify", "check.bin"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("32 blocks checked against the CRC32C taken when they arrived, all good"),
                      result.stdout)
    }

    /// Bytes the cache's data files occupy on disk (a small entry's file holds its meta block too).
    func cacheDataBytes() throws -> UInt64 {
        EntryFiles.all(root: cache).reduce(UInt64(0)) { total, files in
            var info = stat()
            let path = access(files.dataPath, F_OK) == 0 ? files.dataPath : files.base
            return stat(path, &info) == 0 ? total + UInt64(info.st_blocks) * 512 : total
        }
    }

    // 4. With --cache-max-size 64M, two 128 MiB files read one after the other: the cache stays at or below
    //    64 MiB plus one block, and every read is correct.
    func testCacheMaxSizeHoldsWhileTwoLargerFilesAreRead() throws {
        let first = try origin.serveRandomFile("cap1.bin", size: 128 << 20)
        let second = try origin.serveRandomFile("cap2.bin", size: 128 << 20)
        try mount([origin.url("cap1.bin"), origin.url("cap2.bin")], extra: ["--cache-max-size", "64M", "--prefetch", "none"])
        for (name, digest) in [("cap1.bin", first), ("cap2.bin", second)] {
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + name), digest, name)
            XCTAssertLessThanOrEqual(try cacheDataBytes(), (64 << 20) + 65536, "after reading \(name)")
        }
        let files = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]])
        let cached = files.compactMap { $0["cached_bytes"] as? UInt64 }.reduce(0, +)
        XCTAssertLessThanOrEqual(cached, (64 << 20) + 65536)
        XCTAssertGreaterThan(cached, 32 << 20, "the cap is used, not just emptied")
    }

    func testPinnedFilesAreFilledAndNeverEvicted() throws {
        let pinnedDigest = try origin.serveRandomFile("pinned.bin", size: 8 << 20)
        let other = try origin.serveRandomFile("other.bin", size: 32 << 20)
        try mount([origin.url("pinned.bin"), origin.url("other.bin")], extra: ["--cache-max-size", "16M", "--prefetch", "none"])
        XCTAssertEqual(try control(["pin", "pinned.bin"]).status, 0)
        let deadline = Date().addingTimeInterval(20)
        while try file("pinned.bin", in: try statusJSON())["state"] as? String != "complete" && Date() < deadline {
            usleep(50_000)
        }
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/other.bin"), other)
        let pinned = try file("pinned.bin", in: try statusJSON())
        XCTAssertEqual(pinned["cached_bytes"] as? UInt64, 8 << 20, "a pinned file keeps all its blocks")
        XCTAssertEqual(pinned["pinned"] as? Bool, true)
        XCTAssertLessThanOrEqual(try file("other.bin", in: try statusJSON())["cached_bytes"] as? UInt64 ?? .max, 8 << 20)

        let refused = try control(["evict", "pinned.bin"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("pinned"), refused.stderr)
        XCTAssertEqual(try control(["evict", "other.bin"]).status, 0)
        XCTAssertEqual(try file("other.bin", in: try statusJSON())["cached_bytes"] as? UInt64, 0)
        XCTAssertEqual(try statFile(mountpoint + "/other.bin").st_blocks, 0)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/other.bin"), other, "an evicted file reads again")

        try driver.unmount(mountpoint, cache: cache)
        try mount([], extra: ["--cache-max-size", "16M", "--prefetch", "none"])
        XCTAssertEqual(try file("pinned.bin", in: try statusJSON())["pinned"] as? Bool, true, "pins are saved")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/pinned.bin"), pinnedDigest)
    }

    func testMaxDownloadsQueuesTheOtherFiles() throws {
        let faulty = try FaultOrigin()
        defer { faulty.stop() }
        for index in 0..<3 {
            faulty.serve("queued\(index).bin", bytes: pseudoRandomBytes(count: 8 << 20, seed: UInt64(index)), etag: "\"q\(index)\"")
            faulty.setFault(.throttle(512 << 10), for: "queued\(index).bin")
        }
        try mount((0..<3).map { faulty.url("queued\($0).bin") }, extra: ["--prefetch", "all", "--max-downloads", "1"])
        usleep(1_000_000)
        let states = try XCTUnwrap(try statusJSON()["files"] as? [[String: Any]]).compactMap { $0["state"] as? String }
        XCTAssertEqual(states.filter { $0 == "downloading" }.count, 1, "\(states)")
        XCTAssertEqual(states.filter { $0 == "queued" }.count, 2, "\(states)")
        XCTAssertEqual(try control(["pause", "--all"]).status, 0)
    }

    // Issue 24, 6. With the daemon stopped (SIGSTOP), status, add and pause each give up within 12 s with one line
    // that names the mount, the daemon's PID and its state; after SIGCONT all of them work again.
    func testAStoppedDaemonIsNamedWithinTheDeadlineAndWorksAfterSIGCONT() throws {
        try origin.serveRandomFile("frozen.bin", size: 1 << 20)
        try origin.serveRandomFile("later.bin", size: 1 << 20)
        try mount([origin.url("frozen.bin")])
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        XCTAssertEqual(kill(pid, SIGSTOP), 0)
        var resumed = false
        defer { if !resumed { kill(pid, SIGCONT) } }
        let commands = [["status", mountpoint], ["add", origin.url("later.bin"), "--mount", mountpoint],
                        ["pause", "frozen.bin", "--mount", mountpoint]]
        for command in commands {
            let started = Date()
            let result = try driver.run(command, timeout: 30)
            let elapsed = Date().timeIntervalSince(started)
            XCTAssertNotEqual(result.status, 0, "\(command[0]) must fail")
            XCTAssertLessThan(elapsed, 12, "\(command[0]) gave up in time")
            let lines = result.stderr.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "one line: \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(mountpoint), result.stderr)
            XCTAssertTrue(result.stderr.contains("pid \(pid)"), result.stderr)
            XCTAssertTrue(result.stderr.contains("stopped"), result.stderr)
        }
        XCTAssertEqual(kill(pid, SIGCONT), 0)
        resumed = true
        let status = try driver.run(["status", mountpoint, "--timeout", "20"])
        XCTAssertEqual(status.status, 0, status.stderr)
        // The add sent while it was stopped was still queued in its socket: it may have been done since.
        let added = try control(["add", origin.url("later.bin")])
        XCTAssertTrue(added.status == 0 || added.stderr.contains("already mounted"), added.stderr)
        XCTAssertEqual(try control(["pause", "frozen.bin"]).status, 0)
        XCTAssertEqual(try control(["resume", "frozen.bin"]).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: mountpoint + "/later.bin"))
    }
}
