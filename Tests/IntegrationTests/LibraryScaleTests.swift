import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 24: a library of 10,000 URLs under the common limit of 1,024 open files, with the default options.
final class LibraryScaleTests: MountTestCase {
    /// Writes `count` files of 1 to 4 KB under the origin's `library/` folder; returns their bytes by name.
    func makeLibrary(count: Int) throws -> [String: Data] {
        let folder = origin.root + "/library"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var files: [String: Data] = [:]
        for index in 0..<count {
            let name = String(format: "f%05d.bin", index)
            let bytes = Data(pseudoRandomBytes(count: 1000 + index * 7919 % 3000, seed: UInt64(index) + 1))
            try bytes.write(to: URL(fileURLWithPath: folder + "/" + name))
            files[name] = bytes
        }
        return files
    }

    /// The daemon's resident memory in KiB and its open descriptors.
    func daemonUsage(_ pid: pid_t) throws -> (rssKiB: Int, descriptors: Int) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        return (rss, descriptors)
    }

    // 1. and 2. `ls -l` and a read of every file give the origin's bytes with no error while the daemon may open
    //    1,024 files; then status answers within 5 s and the daemon stays under 120 MiB. With 2,000 of the files
    //    held open at once by one reader, every read is right.
    func testTenThousandURLsUnderALimitOfAThousandOpenFiles() throws {
        let files = try makeLibrary(count: 10_000)
        let names = files.keys.sorted()
        let list = scratch.path + "/library.list"
        try names.map { origin.url("library/" + $0) }.joined(separator: "\n").write(toFile: list, atomically: true,
                                                                                    encoding: .utf8)
        let mounted = try driver.mount(mountpoint, urls: [], cache: cache, extra: ["--list", list],
                                       openFileLimit: 1024)
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertTrue(driver.isMounted(mountpoint), mounted.stderr)
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        XCTAssertTrue(limits.split(separator: "\n").contains {
            $0.hasPrefix("Max open files") && $0.split(separator: " ").filter { $0 == "1024" }.count == 2
        }, "the daemon runs under 1024 open files, soft and hard")

        let listed = try Shell.run("/bin/ls", ["-l", mountpoint])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(listed.stdout.split(separator: "\n").count, 10_001, "a total line and 10,000 files")

        var failures: [String] = []
        for name in names {
            guard let read = FileManager.default.contents(atPath: mountpoint + "/" + name) else {
                failures.append("\(name): \(String(cString: strerror(errno)))")
                continue
            }
            if read != files[name] { failures.append("\(name): wrong bytes") }
        }
        XCTAssertEqual(failures.count, 0, "failed reads: \(failures.prefix(5))")
        let usage = try daemonUsage(pid)
        XCTAssertLessThan(usage.descriptors, 1024, "the daemon stayed within its limit")

        let started = Date()
        let status = try driver.run(["status", mountpoint], timeout: 30)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertLessThan(elapsed, 5, "status of 10,000 files answers within 5 s")
        XCTAssertTrue(status.stdout.contains("total: 10000 files"), status.stdout.suffix(300).description)
        XCTAssertLessThanOrEqual(try daemonUsage(pid).rssKiB, 120 << 10, "the daemon's RSS stays within 120 MiB")

        // 2,000 of them open at once in one reader (a process of its own, allowed 4,096 open files).
        let reader = """
        import os, sys
        mount, origin, names = sys.argv[1], sys.argv[2], sys.argv[3:]
        handles = [open(os.path.join(mount, name), 'rb') for name in names]
        bad = [name for name, handle in zip(names, handles)
               if handle.read() != open(os.path.join(origin, name), 'rb').read()]
        print(len(handles), 'open,', len(bad), 'wrong', bad[:5])
        sys.exit(1 if bad else 0)
        """
        let held = Array(names.reversed().prefix(2000))
        let result = try Shell.run("/usr/bin/prlimit", ["--nofile=4096:4096", "/usr/bin/python3", "-c", reader,
                                                        mountpoint, origin.root + "/library"] + held, timeout: 300)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("2000 open, 0 wrong"), result.stdout + result.stderr)
        XCTAssertLessThan(try daemonUsage(pid).descriptors, 1024)
    }
}
