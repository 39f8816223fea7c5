import Foundation
import Glibc
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 3's acceptance points: kills, power loss, remote changes, lying servers, full disks, dead origins.
final class CrashSafetyTests: MountTestCase {
    // 1. Twenty kills in the middle of a copy; the copy then completes, and the origin sent the file about once.
    func testKillLoopResumesWhereEachCopyBroke() throws {
        let size = 256 << 20
        let digest = try origin.serveRandomFile("kill.bin", size: size)
        // The defaults: a commit every 32 MiB (or 0.5 s), and a readahead window of up to 32 MiB.
        let commitBytes = 32 << 20, readahead = 32 << 20
        let options: [String] = []
        let copy = scratch.path + "/copy.bin"
        for round in 0..<20 {
            let daemon = try startForeground([origin.url("kill.bin")], extra: options)
            let cp = try BackgroundProcess("/bin/cp", [mountpoint + "/kill.bin", copy])
            usleep(useconds_t.random(in: 50_000...500_000))
            daemon.stop(signal: SIGKILL)
            _ = cp.waitForExit(timeout: 30)
            XCTAssertFalse(cp.isRunning, "cp hangs after the daemon died (round \(round))")
            XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)
        }
        try mount([origin.url("kill.bin")], extra: options)
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/kill.bin", copy], timeout: 600).status, 0)
        XCTAssertEqual(try Shell.sha256(of: copy), digest)
        let sent = bytesFetched("/kill.bin")
        let lossWindow = commitBytes + readahead
        print("kill loop: the origin sent \(sent) bytes (\(String(format: "%.3f", Double(sent) / Double(size))) x the file) over 20 kills")
        XCTAssertLessThanOrEqual(sent, UInt64(size + 20 * lossWindow),
                                 "the origin sent \(sent >> 20) MiB for a \(size >> 20) MiB file over 20 kills")
    }

    /// Resuming where the transfer broke, with the options a user gets: a copy killed at about 40% costs, on its
    /// second pass, only what the first did not bring, plus at most the 32 MiB that a crash may lose.
    func testACopyKilledAt40PercentResumesThereWithDefaultOptions() throws {
        let size = 256 << 20
        let digest = try origin.serveRandomFile("resume.bin", size: size)
        let copy = scratch.path + "/resume.bin"
        let daemon = try startForeground([origin.url("resume.bin")])
        let cp = try BackgroundProcess("/bin/cp", [mountpoint + "/resume.bin", copy])
        var copied = 0
        let deadline = Date().addingTimeInterval(60)
        while copied < size * 2 / 5 && Date() < deadline && cp.isRunning {
            var info = stat()
            if stat(copy, &info) == 0 { copied = Int(info.st_size) }
            usleep(500)
        }
        daemon.stop(signal: SIGKILL)
        XCTAssertGreaterThanOrEqual(copied, size * 2 / 5, "the copy reached 40% before the kill")
        XCTAssertLessThan(copied, size, "the kill came before the copy finished")
        _ = cp.waitForExit(timeout: 30)
        XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)

        origin.clearAccessLog()
        try mount([origin.url("resume.bin")])
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/resume.bin", copy], timeout: 600).status, 0)
        XCTAssertEqual(try Shell.sha256(of: copy), digest)
        let sent = bytesFetched("/resume.bin")
        let missing = size - copied
        print("kill at \(copied >> 20) MiB of \(size >> 20): the second pass fetched \(sent >> 20) MiB, \(missing >> 20) MiB were missing")
        XCTAssertLessThanOrEqual(sent, UInt64(missing + (32 << 20)),
                                 "the second pass fetched \(sent >> 20) MiB; \(missing >> 20) MiB were missing")
    }

    // 1b. Issue 36, acceptance 5: ten kills of the daemon during a `cp -r` of a directory that is being fetched ahead
    //     (400 files of 4-64 KiB). Every file the copy wrote holds the origin's bytes (a file the kill cut short, a
    //     prefix of them); after each kill the cache's blocks pass their checks; and after the last restart every
    //     file reads right, its cached bytes included.
    func testKillsDuringADirectoryPrefetchingCopyLeaveNoWrongByte() throws {
        let folder = origin.path("fast/killed")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let names = (0..<400).map { String(format: "f%03d.bin", $0) }
        var contents: [String: [UInt8]] = [:]
        for (index, name) in names.enumerated() {
            let bytes = pseudoRandomBytes(count: 4096 + (index * 7919) % (60 << 10), seed: UInt64(index + 100))
            try origin.serve("fast/killed/" + name, bytes: bytes)
            contents[name] = bytes
        }
        let url = origin.url("fast/killed/")
        var complete = 0, cut = 0, unmade = 0, ahead = 0, verifiedRounds = 0
        for round in 0..<10 {
            let daemon = try startForeground([url])
            let copy = scratch.path + "/copy\(round)"
            origin.clearAccessLog()
            let cp = try BackgroundProcess("/bin/cp", ["-r", mountpoint + "/.", copy])
            // The kill comes once the copy reached a random file (between the 20th and the 300th of 400), however
            // fast the machine: a kill after a fixed time found fast copies finished.
            let killAt = Int.random(in: 20...300)
            let deadline = Date().addingTimeInterval(120)
            while cp.isRunning, Date() < deadline,
                  ((try? FileManager.default.contentsOfDirectory(atPath: copy))?.count ?? 0) < killAt {
                usleep(1_000)
            }
            daemon.stop(signal: SIGKILL)
            _ = cp.waitForExit(timeout: 30)
            XCTAssertFalse(cp.isRunning, "cp hangs after the daemon died (round \(round))")
            XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)
            // Files whose data was asked for that the copy never reached: fetched ahead of it (less one: the file
            // cp had opened, but not yet created in the copy, when the kill came).
            let reached = Set((try? FileManager.default.contentsOfDirectory(atPath: copy)) ?? [])
            ahead += max(0, Set(origin.accessLog().filter { $0.path.hasPrefix("/fast/killed/f") && $0.range != "bytes=0-0" }
                .map { String($0.path.dropFirst("/fast/killed/".count)) }).subtracting(reached).count - 1)
            for name in reached {
                let written = [UInt8](try XCTUnwrap(FileManager.default.contents(atPath: copy + "/" + name)))
                let expected = try XCTUnwrap(contents[name], "cp wrote a file the origin does not have: \(name)")
                XCTAssertTrue(written.count <= expected.count && expected.starts(with: written),
                              "round \(round): \(name) holds bytes that are not the origin's")
                if written.count == expected.count { complete += 1 } else { cut += 1 }
            }
            // Every block the cache holds passes its check, and no entry is damaged. An entry the kill caught
            // before its first commit (no header yet) is reported as EMPTY: it holds nothing.
            try driver.waitForUnlock(cache)
            let verified = try driver.run(["verify", "--cache", cache])
            let bad = verified.stdout.split(separator: "\n").filter { $0.hasPrefix("BAD") }
            XCTAssertTrue(bad.isEmpty, "round \(round): \(bad)")
            // A kill before the first commit leaves only EMPTY entries (no slot yet): verified over all rounds below.
            XCTAssertTrue(verified.stdout.contains("OK ") || verified.stdout.contains("EMPTY "),
                          "round \(round): nothing verified: \(verified.stdout) \(verified.stderr)")
            verifiedRounds += verified.stdout.contains("OK ") ? 1 : 0
            let damaged = verified.stdout.split(separator: "\n").filter { $0.hasPrefix("DAMAGED") }
            XCTAssertTrue(damaged.isEmpty, "round \(round): \(damaged)")
            XCTAssertEqual(verified.status, 0, "round \(round): \(verified.stdout)")
            unmade += verified.stdout.split(separator: "\n").filter { $0.hasPrefix("EMPTY") }.count
        }
        XCTAssertGreaterThan(verifiedRounds, 0, "no round left a committed entry to verify")
        print("10 kills during cp -r: the copies wrote \(complete) whole files and \(cut) cut short; \(ahead) files were fetched ahead of them; \(unmade) entries were caught being made")
        XCTAssertGreaterThan(complete, 0, "no copy got anywhere before its kill")
        XCTAssertGreaterThan(ahead, 0, "no file was being fetched ahead of a copy when its daemon was killed")
        // The last restart: every file, what the cache kept included, is the origin's.
        origin.clearAccessLog()
        try mount([url])
        for name in names {
            XCTAssertEqual(try fileBytes(mountpoint + "/" + name, offset: 0, count: 1 << 20), contents[name], name)
        }
        // (An open checks a cached file against its server with a one-byte probe: that is no data.)
        let fetched = Set(origin.accessLog().filter { $0.path.hasPrefix("/fast/killed/f") && $0.range != "bytes=0-0" }
            .map(\.path))
        print("after the last restart, \(names.count - fetched.count) of \(names.count) files were read from the cache")
    }

    // 2. Corrupted blocks and a truncated bitmap: every read is still correct.
    func testPowerLossDamageIsNeverServed() throws {
        let size = 16 << 20
        let digest = try origin.serveRandomFile("power.bin", size: size)
        // A small file too: the open checks it whole before it answers (CacheEntry+OnePassCheck.swift), where
        // the 16 MiB file is checked in the background.
        let smallDigest = try origin.serveRandomFile("power-small.bin", size: 1 << 20)
        let urls = [origin.url("power.bin"), origin.url("power-small.bin")]
        try mount(urls, extra: ["--prefetch", "none"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/power.bin"), digest)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/power-small.bin"), smallDigest)
        try driver.unmount(mountpoint, cache: cache)
        let (folder, smallFolder) = try { () throws -> (String, String) in
            // The store holds the cache's lock: it goes before the next mount.
            let store = try CacheStore(root: cache, logger: .init(label: "test"))
            return (store.dataPath(for: origin.url("power.bin")), store.dataPath(for: origin.url("power-small.bin")))
        }()
        try driver.waitForUnlock(cache)

        // Rotten sectors in five blocks, bitmap intact: those blocks fail their CRC and are fetched again.
        let data = try SystemFile(path: folder, flags: O_RDWR)
        for block in [0, 3, 100, 200, 255] { try data.write([0xDE, 0xAD, 0xBE, 0xEF], at: UInt64(block * 65536 + 777)) }
        try SystemFile(path: smallFolder, flags: O_RDWR).write([0xDE, 0xAD], at: 7 * 65536 + 99)
        try mount(urls, extra: ["--prefetch", "none"])
        origin.clearAccessLog()
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/power.bin"), digest)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/power-small.bin"), smallDigest)
        let refetched = bytesFetched("/power.bin")
        XCTAssertGreaterThanOrEqual(refetched, 5 * 65536)
        XCTAssertLessThan(refetched, UInt64(size / 2), "only the damaged blocks are fetched again")
        let smallRefetched = bytesFetched("/power-small.bin")
        XCTAssertGreaterThanOrEqual(smallRefetched, 65536, "the damaged block of the small file is fetched again")
        XCTAssertLessThan(smallRefetched, 512 << 10, "and only it")
        try driver.unmount(mountpoint, cache: cache)

        // A torn meta block plus more rot: the entry starts empty, and the bytes are right.
        let meta = EntryFiles(root: cache, url: origin.url("power.bin")).metaPath
        XCTAssertEqual(truncate(meta, 20), 0)
        for block in [1, 2, 50] { try data.write([0x00, 0x11], at: UInt64(block * 65536)) }
        try mount([origin.url("power.bin")])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/power.bin"), digest)
    }

    // 3. The file changes on the origin while open: ESTALE for the old handle, the new version for new opens.
    func testRemoteChangeGivesOldHandlesESTALEAndNewOpensTheNewVersion() throws {
        try origin.serveRandomFile("change.bin", size: 8 << 20)
        let oldBytes = try fileBytes(origin.path("change.bin"), offset: 0, count: 8 << 20)
        try mount([origin.url("change.bin")], extra: ["--prefetch", "none"])
        let path = mountpoint + "/change.bin"
        let old = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(old, 0)
        defer { close(old) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(Glibc.pread(old, &buffer, 4096, 0), 4096)
        XCTAssertTrue(buffer.elementsEqual(oldBytes[..<4096]))

        let newDigest = try origin.serveRandomFile("change.bin", size: 9 << 20)  // new size and mtime: new ETag
        XCTAssertEqual(utimes(origin.path("change.bin"), [timeval(tv_sec: time(nil) + 3600, tv_usec: 0),
                                                           timeval(tv_sec: time(nil) + 3600, tv_usec: 0)]), 0)
        XCTAssertEqual(Glibc.pread(old, &buffer, 4096, 5 << 20), -1)
        XCTAssertEqual(errno, ESTALE)
        XCTAssertEqual(Glibc.pread(old, &buffer, 4096, 4096), -1, "not even the cached part: never a mix")
        XCTAssertEqual(errno, ESTALE)

        XCTAssertEqual(try statFile(path).st_size, off_t(9 << 20))
        XCTAssertEqual(try Shell.sha256(of: path), newDigest)
    }

    // A fully cached file still notices a change: opens re-check the server (here at every open).
    func testOpeningAFullyCachedFileNoticesARemoteChange() throws {
        let oldDigest = try origin.serveRandomFile("recheck.bin", size: 2 << 20)
        try mount([origin.url("recheck.bin")], extra: ["--revalidate", "0"])
        let path = mountpoint + "/recheck.bin"
        XCTAssertEqual(try Shell.sha256(of: path), oldDigest)
        let newDigest = try origin.serveRandomFile("recheck.bin", size: 3 << 20)
        XCTAssertEqual(utimes(origin.path("recheck.bin"), [timeval(tv_sec: time(nil) + 7200, tv_usec: 0),
                                                            timeval(tv_sec: time(nil) + 7200, tv_usec: 0)]), 0)
        close(open(path, O_RDONLY))  // this open starts the check
        let deadline = Date().addingTimeInterval(10)
        while (try? statFile(path).st_size) != off_t(3 << 20) && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try statFile(path).st_size, off_t(3 << 20))
        XCTAssertEqual(try Shell.sha256(of: path), newDigest)
    }

    // 4. A server that ignores Range, and one that lies in Content-Range: correct data or EIO, never wrong data.
    func testServersThatIgnoreRangeOrLieNeverYieldWrongBytes() throws {
        let faulty = try FaultOrigin()
        defer { faulty.stop() }
        let content = pseudoRandomBytes(count: 6 << 20, seed: 3)
        faulty.serve("norange.bin", bytes: content, etag: "\"n1\"")
        faulty.serve("liar.bin", bytes: content, etag: "\"l1\"")
        try mount([faulty.url("norange.bin"), faulty.url("liar.bin")], extra: ["--prefetch", "none"])
        faulty.setFault(.ignoreRange, for: "norange.bin")
        faulty.setFault(.shiftContentRange(4096), for: "liar.bin")

        XCTAssertTrue(try pread(mountpoint + "/norange.bin", offset: 5 << 20, count: 4096).elementsEqual(content[(5 << 20)..<((5 << 20) + 4096)]))
        let copy = scratch.path + "/norange.copy"
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/norange.bin", copy]).status, 0)
        XCTAssertEqual(try XCTUnwrap(FileManager.default.contents(atPath: copy)), Data(content))
        XCTAssertEqual(faulty.rangesRequested("norange.bin").filter { $0.isEmpty }.count, 1, "one whole-file stream")

        let liar = open(mountpoint + "/liar.bin", O_RDONLY)
        defer { close(liar) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(Glibc.pread(liar, &buffer, 4096, 1 << 20), -1)
        XCTAssertEqual(errno, EIO)
        XCTAssertEqual(try statFile(mountpoint + "/liar.bin").st_blocks, 0, "nothing from the liar was cached")
    }

    // 5. Cache on a 64 MiB tmpfs, 256 MiB read: no wrong byte, a clear error in the log, and the mount lives.
    func testFullCacheDiskNeverCorruptsAndKeepsTheMountAlive() throws {
        let size = 256 << 20
        let digest = try origin.serveRandomFile("full.bin", size: size)
        let small = scratch.path + "/small-disk"
        XCTAssertEqual(mkdir(small, 0o700), 0)
        let mounted = try Shell.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64m", "tmpfs", small])
        guard mounted.status == 0 else { throw XCTSkip("cannot mount a tmpfs here: \(mounted.stderr)") }
        defer { _ = try? Shell.run("/bin/umount", ["-l", small]) }
        let log = scratch.path + "/full.log"
        let result = try driver.mount(mountpoint, urls: [origin.url("full.bin")], cache: small + "/cache",
                                      extra: ["--log-file", log])
        XCTAssertEqual(result.status, 0, result.stderr)
        let copy = scratch.path + "/full.copy"
        let cp = try Shell.run("/bin/cp", [mountpoint + "/full.bin", copy], timeout: 600)
        if cp.status == 0 {
            XCTAssertEqual(try Shell.sha256(of: copy), digest, "a full disk must never produce wrong bytes")
        } else {
            XCTAssertTrue(cp.stderr.contains("Input/output error") || cp.stderr.contains("No space"), cp.stderr)
        }
        XCTAssertTrue(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("the cache disk is full"))
        XCTAssertEqual(try statFile(mountpoint + "/full.bin").st_size, off_t(size), "the mount is alive")
        XCTAssertLessThanOrEqual(UInt64(try statFile(mountpoint + "/full.bin").st_blocks) * 512, 64 << 20)
        // What could not be written is not "committed": the unmount says what was kept, and fails.
        let unmounted = try driver.run(["unmount", mountpoint])
        XCTAssertNotEqual(unmounted.status, 0, unmounted.stdout)
        XCTAssertTrue(unmounted.stderr.contains("its cache did not keep everything"), unmounted.stderr)
        try driver.waitForUnlock(small + "/cache")
    }

    // 5b. A file opened when the cache disk has no room for its cache entry fails with ENOSPC, which says what is
    //     wrong, not EIO; once there is room again it reads right.
    func testAnOpenOnAFullCacheDiskFailsWithNoSpace() throws {
        let digest = try origin.serveRandomFile("room.bin", size: 1 << 20)
        let small = scratch.path + "/tiny-disk"
        XCTAssertEqual(mkdir(small, 0o700), 0)
        let mounted = try Shell.run("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", small])
        guard mounted.status == 0 else { throw XCTSkip("cannot mount a tmpfs here: \(mounted.stderr)") }
        defer { _ = try? Shell.run("/bin/umount", ["-l", small]) }
        let result = try driver.mount(mountpoint, urls: [origin.url("room.bin")], cache: small + "/cache",
                                      extra: ["--log-file", scratch.path + "/room.log"])
        XCTAssertEqual(result.status, 0, result.stderr)
        // Fill the disk to its last block.
        _ = try Shell.run("/bin/dd", ["if=/dev/zero", "of=" + small + "/filler", "bs=64k"])
        let full = try Shell.run("/bin/cat", [mountpoint + "/room.bin"])
        XCTAssertNotEqual(full.status, 0)
        XCTAssertTrue(full.stderr.contains("No space left on device"), full.stderr)
        XCTAssertEqual(unlink(small + "/filler"), 0)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/room.bin"), digest)
        try driver.unmount(mountpoint, cache: small + "/cache")
    }

    // 6. Origin stopped: cached ranges read fine, uncached ones fail with EIO in time; after a restart, all is well.
    func testOriginDownServesCachedDataAndRecoversWithoutRemount() throws {
        try origin.serveRandomFile("down.bin", size: 8 << 20)
        let original = origin.path("down.bin")
        try mount([origin.url("down.bin")], extra: ["--connect-timeout", "2", "--timeout", "3", "--retries", "2",
                                                    "--prefetch", "none"])
        let path = mountpoint + "/down.bin"
        XCTAssertEqual(try pread(path, offset: 0, count: 65536), try fileBytes(original, offset: 0, count: 65536))

        origin.halt()
        defer { try? origin.resume() }
        XCTAssertEqual(try pread(path, offset: 0, count: 65536), try fileBytes(original, offset: 0, count: 65536))
        let started = Date()
        XCTAssertThrowsError(try pread(path, offset: 6 << 20, count: 4096)) { error in
            XCTAssertTrue("\(error)".contains("Input/output error"), "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "an uncached read must fail within the timeouts")

        try origin.resume()
        XCTAssertEqual(try pread(path, offset: 6 << 20, count: 4096), try fileBytes(original, offset: 6 << 20, count: 4096))
        XCTAssertGreaterThanOrEqual(try statFile(path).st_blocks * 512, 65536, "nothing cached was dropped")
    }

    // Retries resume at the byte where the connection broke, so nothing is fetched twice.
    func testDroppedConnectionsResumeWithoutFetchingAnythingTwice() throws {
        let faulty = try FaultOrigin()
        defer { faulty.stop() }
        let content = pseudoRandomBytes(count: 24 << 20, seed: 9)
        faulty.serve("drops.bin", bytes: content, etag: "\"d1\"")
        try mount([faulty.url("drops.bin")], extra: ["--prefetch", "none"])
        faulty.setFault(.dropAfter(bytes: 1_000_000, times: 3), for: "drops.bin")
        let copy = scratch.path + "/drops.copy"
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/drops.bin", copy]).status, 0)
        XCTAssertEqual(try XCTUnwrap(FileManager.default.contents(atPath: copy)), Data(content))
        XCTAssertEqual(faulty.bodyBytesSent("drops.bin"), UInt64(content.count) + 1, "each byte once (+1: the probe)")
        XCTAssertTrue(faulty.rangesRequested("drops.bin").contains { range in
            guard let start = range.dropFirst(6).split(separator: "-").first.flatMap({ Int($0) }) else { return false }
            return start % 65536 != 0
        }, "a retry starts mid-block, where the data stopped")
    }

    // FUSE INTERRUPT: Ctrl-C ends a read that waits on a stalled server.
    func testInterruptEndsAReadWaitingOnAStalledServer() throws {
        let faulty = try FaultOrigin()
        defer { faulty.stop() }
        faulty.serve("stall.bin", bytes: pseudoRandomBytes(count: 1 << 20), etag: "\"s1\"")
        try mount([faulty.url("stall.bin")], extra: ["--timeout", "60", "--prefetch", "none"])
        faulty.setFault(.stall, for: "stall.bin")
        defer { faulty.setFault(.none, for: "stall.bin") }
        let reader = try BackgroundProcess("/bin/cat", [mountpoint + "/stall.bin"])
        usleep(700_000)
        XCTAssertTrue(reader.isRunning, "the read should be waiting on the stalled server")
        let started = Date()
        kill(reader.pid, SIGINT)
        XCTAssertNotNil(reader.waitForExit(timeout: 5), "Ctrl-C did not end the read")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertEqual(try statFile(mountpoint + "/stall.bin").st_size, 1 << 20, "the mount still answers")
    }
}
