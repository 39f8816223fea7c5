import Foundation
import Glibc
@testable import RangeFSCache
import RangeFSTestSupport
import XCTest

/// Issue 26: FUSE passthrough. A complete, committed file is read by the kernel from the cache's data file, with
/// no READ reaching the daemon (counted by `status --json`'s `daemon_reads`); partial files, files with a normal
/// handle open and files due for a check take the normal path; a daemon without CAP_SYS_ADMIN falls back and
/// says so. Real nginx, real mounts, default options except where an option is the point.
final class PassthroughTests: MountTestCase {
    func fileStatus(_ name: String) throws -> [String: Any] {
        let files = try XCTUnwrap(try statusDocument()["files"] as? [[String: Any]])
        return try XCTUnwrap(files.first { $0["name"] as? String == name }, "no \(name) in \(files)")
    }

    func statusDocument() throws -> [String: Any] {
        let result = try driver.run(["status", "--mount", mountpoint, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    func daemonReads(_ name: String) throws -> Int {
        try XCTUnwrap(try fileStatus(name)["daemon_reads"] as? Int)
    }

    /// Drops the kernel's clean pages, so that a read goes to the file system (or its backing file).
    func dropCaches() {
        sync()
        let descriptor = open("/proc/sys/vm/drop_caches", O_WRONLY)
        guard descriptor >= 0 else { return XCTFail("cannot drop caches: \(String(cString: strerror(errno)))") }
        _ = write(descriptor, "3\n", 2)
        close(descriptor)
    }

    /// Reads `name` whole after dropping caches until a read sends the daemon no READ (the file is committed
    /// and opened in passthrough); returns whether one did within `seconds`, checking each read's sha256.
    func readsPastTheDaemon(_ name: String, digest: String, within seconds: Double = 15) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            dropCaches()
            let before = try daemonReads(name)
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + name), digest)
            if try daemonReads(name) == before { return true }
            usleep(300_000)
        }
        return false
    }

    /// Waits until the cache on disk records every block of the file at `origin.url(name)` as present: its
    /// commit, an event read from the entry's own files, not a timer. False if that never happened within a
    /// minute (the group commit runs every 0.5 s).
    func committedWhole(_ name: String) -> Bool {
        let url = origin.url(name)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            for files in EntryFiles.all(root: cache) {
                guard case .entry(let loaded) = files.load(), loaded.meta.header.url == url else { continue }
                if let present = loaded.meta.slot?.present, present.setCount == loaded.meta.header.blockCount {
                    return true
                }
            }
            usleep(20_000)
        }
        return false
    }

    // 1. A complete file, page cache dropped, read through the mount: right sha256, and no READ reached the daemon.
    //    status and the xattrs show the passthrough handle while it is open.
    func testAWarmReadOfACompleteFileBypassesTheDaemon() throws {
        let digest = try origin.serveRandomFile("warm.bin", size: 8 << 20)
        try mount([origin.url("warm.bin")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/warm.bin"), digest)  // completes it
        XCTAssertTrue(try readsPastTheDaemon("warm.bin", digest: digest), "a warm read never bypassed the daemon")
        XCTAssertTrue((try statusDocument()["passthrough"] as? String)?.hasPrefix("on") ?? false)

        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: mountpoint + "/warm.bin"))
        defer { try? handle.close() }
        XCTAssertEqual(try fileStatus("warm.bin")["passthrough_handles"] as? Int, 1)
        let attribute = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.passthrough_handles",
                                                            mountpoint + "/warm.bin"])
        XCTAssertEqual(attribute.stdout, "1")
        let text = try driver.run(["status", "--mount", mountpoint, "--all"])
        XCTAssertTrue(text.stdout.contains("passthrough: on"), text.stdout)
    }

    // Issue 36: a file read whole is passed through by an open right after, before the next commit tick: the
    // open commits it first. 100 KB past `--commit-bytes` (8 MiB), so that its last blocks wait for the tick.
    func testAnOpenRightAfterTheColdReadPassesTheFileThrough() throws {
        let size = (8 << 20) + 100_000
        let digest = try origin.serveRandomFile("right-after.bin", size: size)
        try mount([origin.url("right-after.bin")])
        // Read whole and opened again at once, in this process: no command runs in between to let the tick come.
        let path = mountpoint + "/right-after.bin"
        let first = try XCTUnwrap(FileHandle(forReadingAtPath: path))
        let bytes = try first.readToEnd() ?? Data()
        try first.close()
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: path))
        defer { try? handle.close() }
        XCTAssertEqual(bytes.count, size)
        XCTAssertEqual(Array(bytes.prefix(65536)), Array(try fileBytes(origin.path("right-after.bin"), offset: 0, count: 65536)))
        _ = digest
        let before = try daemonReads("right-after.bin")
        XCTAssertEqual(try fileStatus("right-after.bin")["passthrough_handles"] as? Int, 1,
                       "the open right after the cold read was not passed through")
        dropCaches()
        XCTAssertEqual(Array(try handle.read(upToCount: 65536) ?? Data()),
                       Array(try fileBytes(origin.path("right-after.bin"), offset: 0, count: 65536)))
        XCTAssertEqual(try daemonReads("right-after.bin"), before, "a READ reached the daemon")
    }

    // 2a. A partial file reads through the daemon.
    func testAPartialFileReadsThroughTheDaemon() throws {
        let digest = try origin.serveRandomFile("part.bin", size: 64 << 20)
        try mount([origin.url("part.bin")])
        let original = try Data(contentsOf: URL(fileURLWithPath: origin.path("part.bin")))
        XCTAssertEqual(try pread(mountpoint + "/part.bin", offset: 0, count: 1 << 20), Array(original.prefix(1 << 20)))
        XCTAssertEqual(try fileStatus("part.bin")["state"] as? String, "partial", "not completed by one 1 MiB read")
        dropCaches()
        let before = try daemonReads("part.bin")
        XCTAssertEqual(try pread(mountpoint + "/part.bin", offset: 4096, count: 4096), Array(original[4096..<8192]))
        XCTAssertGreaterThan(try daemonReads("part.bin"), before, "a partial file's read comes to the daemon")
        _ = digest
    }

    // 2b/2d. A file completed through a normal handle gets passthrough at a later open, once that handle is
    //        closed; while it is open, another open takes the normal path too (the kernel refuses mixed modes).
    func testAFileCompletedWhileOpenGetsPassthroughOnceItsNormalHandleCloses() throws {
        let digest = try origin.serveRandomFile("held.bin", size: 4 << 20)
        try mount([origin.url("held.bin")])
        let first = try XCTUnwrap(FileHandle(forReadingAtPath: mountpoint + "/held.bin"))
        XCTAssertEqual(Shell.sha256(of: try first.readToEnd() ?? Data()), digest)  // complete, through a normal handle
        XCTAssertTrue(committedWhole("held.bin"), "the complete file was never committed")
        dropCaches()
        let before = try daemonReads("held.bin")
        XCTAssertEqual(try pread(mountpoint + "/held.bin", offset: 0, count: 4096).count, 4096)
        XCTAssertGreaterThan(try daemonReads("held.bin"), before, "a normal handle is open: the new open is normal")
        XCTAssertEqual(try fileStatus("held.bin")["passthrough_handles"] as? Int, 0)
        try first.close()
        XCTAssertTrue(try readsPastTheDaemon("held.bin", digest: digest), "no passthrough after the normal handle closed")
    }

    // 2c. A file changed on the server is never served stale through passthrough: an open due for its check
    //     takes the normal path, and the new version is what later opens read. (`--revalidate 5`: the check's
    //     timing is the point of this test; 5 s rather than 1 so that the opens of `readsPastTheDaemon`, a
    //     `sync` and two `rangefs status` apart, come within it on a loaded machine.)
    func testAFileChangedOnTheServerIsNeverReadStaleThroughPassthrough() throws {
        let first = try origin.serveRandomFile("change.bin", size: 2 << 20)
        try mount([origin.url("change.bin")], extra: ["--revalidate", "5"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/change.bin"), first)
        XCTAssertTrue(try readsPastTheDaemon("change.bin", digest: first))
        sleep(6)  // the next open is due for its check
        try origin.serve("change.bin", bytes: pseudoRandomBytes(count: 2 << 20, seed: 99))
        let second = try Shell.sha256(of: origin.path("change.bin"))
        dropCaches()
        let before = try daemonReads("change.bin")
        _ = try? Shell.run("/bin/cat", [mountpoint + "/change.bin"])  // the old version or ESTALE, but not passthrough
        XCTAssertGreaterThan(try daemonReads("change.bin"), before, "an open due for its check is not passed through")
        let deadline = Date().addingTimeInterval(15)
        var seen = ""
        while Date() < deadline && seen != second {
            usleep(300_000)
            seen = (try? Shell.sha256(of: mountpoint + "/change.bin")) ?? ""
        }
        XCTAssertEqual(seen, second, "the new version is read")
        XCTAssertTrue(try readsPastTheDaemon("change.bin", digest: second), "the new version is passed through once complete")
    }

    // 2e. A daemon without CAP_SYS_ADMIN in the initial user namespace (run in a user namespace of its own, as
    //     root there) falls back to reading through the daemon, reads right, and status says why. The file is
    //     larger than a small entry (1 MiB), which is never passed through.
    func testWithoutCapSysAdminTheMountFallsBackAndSaysSo() throws {
        let digest = try origin.serveRandomFile("plain.bin", size: 2 << 20)
        XCTAssertEqual(mkdir(mountpoint, 0o755), 0)
        let script = """
            trap 'fusermount3 -uz "$2" 2>/dev/null' EXIT
            "$1" mount "$2" "$3" --cache "$4" || exit 1
            sha256sum "$2/plain.bin"
            sleep 1
            sha256sum "$2/plain.bin"
            "$1" status --mount "$2" --json
            fusermount3 -u "$2"
            """
        let result = try Shell.run("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script,
                                                        "sh", driver.binary, mountpoint, origin.url("plain.bin"), cache],
                                   timeout: 120)
        XCTAssertEqual(result.status, 0, result.stderr)
        try driver.waitForUnlock(cache)
        let digests = result.stdout.split(separator: "\n").filter { $0.hasSuffix("plain.bin") }
            .map { String($0.split(separator: " ")[0]) }
        XCTAssertEqual(digests, [digest, digest], result.stdout)
        let json = try XCTUnwrap(result.stdout.range(of: "{"), result.stdout)
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout[json.lowerBound...].utf8))
                                   as? [String: Any])
        let mode = try XCTUnwrap(status["passthrough"] as? String)
        XCTAssertTrue(mode.hasPrefix("off") && mode.contains("CAP_SYS_ADMIN"), mode)
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        XCTAssertGreaterThan(files.first?["daemon_reads"] as? Int ?? 0, 0, "read through the daemon")
    }

    // 3. Under a cache cap, a file open in passthrough is not evicted while other files fill the cache, and its
    //    open handle reads it right to the end.
    func testAFileOpenInPassthroughSurvivesEvictionPressure() throws {
        let keep = try origin.serveRandomFile("keep.bin", size: 4 << 20)
        let big = try origin.serveRandomFile("big.bin", size: 24 << 20)
        try mount([origin.url("keep.bin"), origin.url("big.bin")], extra: ["--cache-max-size", "8M"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/keep.bin"), keep)
        XCTAssertTrue(try readsPastTheDaemon("keep.bin", digest: keep))
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: mountpoint + "/keep.bin"))
        defer { try? handle.close() }
        var bytes = try handle.read(upToCount: 1) ?? Data()
        XCTAssertEqual(try fileStatus("keep.bin")["passthrough_handles"] as? Int, 1)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/big.bin"), big)  // fills the cache past its cap
        XCTAssertEqual((try fileStatus("keep.bin")["cached_bytes"] as? NSNumber)?.intValue, 4 << 20, "not evicted")
        dropCaches()
        bytes += try handle.readToEnd() ?? Data()
        XCTAssertEqual(Shell.sha256(of: bytes), keep, "the open handle reads its file whole")
        // The fill that the cap keeps busy must not outlive the mount: it once recursed until the daemon crashed at
        // unmount, holding the cache's lock for ever.
        try handle.close()
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertNoThrow(try driver.waitForUnlock(cache, timeout: 30), "the daemon exited after its unmount")
    }
}
