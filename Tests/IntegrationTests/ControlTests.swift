import Foundation
import Glibc
import RangeFSCore
import RangeFSTestSupport
import XCTest

/// Issue 5's control channel: status, add, rm, pause/resume, live verify, and the saved set of files.
final class ControlTests: MountTestCase {
    func control(_ arguments: [String]) throws -> ProcessResult {
        try driver.run(arguments + ["--mount", mountpoint])
    }

    func statusJSON() throws -> [String: Any] {
        let result = try driver.run(["status", mountpoint, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    func file(_ name: String, in status: [String: Any]) throws -> [String: Any] {
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        return try XCTUnwrap(files.first { $0["name"] as? String == name }, "no \(name) in \(files)")
    }

    // 1. add makes a file visible and readable within 1 s, and it is still there after a restart.
    func testAddedFileIsReadableAtOnceAndSurvivesARestart() throws {
        let first = try origin.serveRandomFile("first.bin", size: 1 << 20)
        let later = try origin.serveRandomFile("later.bin", size: 3 << 20)
        try mount([origin.url("first.bin")], extra: ["--prefetch", "none"])
        let started = Date()
        let added = try control(["add", origin.url("later.bin"), "--name", "added.bin"])
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/added.bin"), later)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "visible and readable within a second")

        try driver.unmount(mountpoint, cache: cache)
        try mount([], extra: ["--prefetch", "none"])  // no URLs: the cache remembers both files
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["added.bin", "first.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/first.bin"), first)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/added.bin"), later)
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
        XCTAssertEqual((entry["map"] as? String)?.count, RangeFS.mapWidth)
        try driver.unmount(mountpoint, cache: cache)
        let folder = try CacheStore(root: cache, logger: .init(label: "test")).directory(for: origin.url("partial.bin"))
        let record = try BitmapRecord.decode(try XCTUnwrap(FileSystemCalls.readSmallFile(folder + "/bitmap")))
        XCTAssertEqual(UInt64(record.present.setCount) * 65536, cached)
    }

    // 5. status is plain text when not on a terminal, and --json is JSON.
    func testStatusIsPlainTextOffATerminal() throws {
        try origin.serveRandomFile("plain.bin", size: 1 << 20)
        try mount([origin.url("plain.bin")], extra: ["--prefetch", "none"])
        let result = try driver.run(["status", mountpoint])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stdout.contains("\u{1B}"), "no escape codes when stdout is not a terminal")
        XCTAssertTrue(result.stdout.contains("plain.bin"))
        XCTAssertTrue(result.stdout.contains("total: 1 files"))
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
        XCTAssertTrue(result.stdout.contains("32 blocks checked, all good"), result.stdout)
    }
}
