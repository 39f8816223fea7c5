import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// What the archives work left (issue 49), through a real mount and nginx on 127.0.0.1: `archives` given on a
/// list-file line or to `rangefs add` survives a remount without URLs, `rangefs rm` deletes the kept index, a plain
/// READDIR types a symlink member as one, and a `.tar.gz` being indexed shows its progress.
final class ArchiveKeepingTests: MountTestCase {
    /// Writes a zip holding `inside.txt` (its text: the zip's name) at `name` in the origin.
    private func serveZip(_ name: String) throws {
        let script = "import sys, zipfile\nzipfile.ZipFile(sys.argv[1], 'w').writestr('inside.txt', sys.argv[2])\n"
        try script.write(toFile: scratch.path + "/zip.py", atomically: true, encoding: .utf8)
        let made = try Shell.run("/usr/bin/env", ["python3", scratch.path + "/zip.py", origin.path(name), name])
        XCTAssertEqual(made.status, 0, made.stderr)
    }

    private func isFolder(_ name: String) throws -> Bool {
        try statFile(mountpoint + "/" + name).st_mode & S_IFMT == S_IFDIR
    }

    private func keptIndexes() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: cache + "/archives")) ?? []
    }

    func testArchivesFromAListLineAndFromAddSurviveARemountWithoutURLsAndRmDeletesTheKeptIndex() throws {
        for name in ["listed.zip", "added.zip", "plain.zip"] { try serveZip(name) }
        let list = scratch.path + "/files.list"
        try "\(origin.url("listed.zip")) archives\n\(origin.url("plain.zip"))\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        try mount([], extra: ["--list", list])
        let added = try driver.run(["add", origin.url("added.zip"), "archives", "--mount", mountpoint])
        XCTAssertEqual(added.status, 0, added.stdout + added.stderr)
        XCTAssertTrue(try isFolder("listed.zip"))
        XCTAssertTrue(try isFolder("added.zip"), "rangefs add URL archives shows a folder")
        XCTAssertFalse(try isFolder("plain.zip"))
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/added.zip/inside.txt"]).stdout, "added.zip")
        try driver.unmount(mountpoint, cache: cache)

        // No URL and no --archives: the saved set says which ones are folders.
        try mount([])
        XCTAssertTrue(try isFolder("listed.zip"), "the list line's archives kept in catalog.json")
        XCTAssertTrue(try isFolder("added.zip"), "the add's archives kept in catalog.json")
        XCTAssertFalse(try isFolder("plain.zip"))
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/listed.zip/inside.txt"]).stdout, "listed.zip")
        XCTAssertEqual(keptIndexes().count, 2, "both indexes kept")

        // rm takes the kept index with the archive's entry.
        XCTAssertEqual(try driver.run(["rm", "added.zip", "--mount", mountpoint]).status, 0)
        XCTAssertEqual(keptIndexes().count, 1, "rm leaves no index of added.zip in the cache")
        XCTAssertEqual(try driver.run(["evict", "listed.zip", "--mount", mountpoint]).status, 0)
        XCTAssertEqual(keptIndexes(), [], "evict leaves no index of listed.zip in the cache")
    }

    /// A large folder is read in several pages; with READDIRPLUS_AUTO the kernel asks the later ones with a plain
    /// READDIR, whose entries carry only a type (d_type): `find -type l` and os.scandir trust it.
    func testAPlainReaddirTypesASymlinkMemberAsASymlink() throws {
        let script = #"""
        import io, sys, tarfile
        with tarfile.open(sys.argv[1], "w") as t:
            for i in range(4000):
                info = tarfile.TarInfo("m%05d" % i)
                if i % 10 == 9:
                    info.type, info.linkname = tarfile.SYMTYPE, "m%05d" % (i - 1)
                    t.addfile(info)
                else:
                    info.size = 1
                    t.addfile(info, io.BytesIO(b"x"))
        """#
        try script.write(toFile: scratch.path + "/links.py", atomically: true, encoding: .utf8)
        let made = try Shell.run("/usr/bin/env", ["python3", scratch.path + "/links.py", origin.path("links.tar")])
        XCTAssertEqual(made.status, 0, made.stderr)
        try mount([origin.url("links.tar")], extra: ["--archives"])
        let scan = #"""
        import os, sys
        entries = list(os.scandir(sys.argv[1]))
        wrong = [e.name for e in entries if e.is_symlink() != (int(e.name[1:]) % 10 == 9)]
        print(len(entries), "entries,", len(wrong), "typed wrong:", wrong[:5])
        sys.exit(1 if wrong or len(entries) != 4000 else 0)
        """#
        try scan.write(toFile: scratch.path + "/scan.py", atomically: true, encoding: .utf8)
        let result = try Shell.run("/usr/bin/env", ["python3", scratch.path + "/scan.py", mountpoint + "/links.tar"])
        print("links.tar: \(result.stdout)")
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
    }

    /// A `.tar.gz` indexed over a throttled origin (nginx `limit_rate 32k` per connection): while `ls` waits for
    /// the index, `user.rangefs.archive` and `rangefs status` show a share read between 0 and 100%.
    func testATarGzBeingIndexedShowsItsProgress() throws {
        let script = #"""
        import os, sys, tarfile
        with tarfile.open(sys.argv[1], "w:gz") as t:
            for i in range(8):
                path = os.path.join(sys.argv[2], "part%02d" % i)
                open(path, "wb").write(os.urandom(128 << 10))
                t.add(path, "part%02d" % i)
        """#
        try script.write(toFile: scratch.path + "/slow.py", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: origin.path("slow"), withIntermediateDirectories: true)
        let made = try Shell.run("/usr/bin/env", ["python3", scratch.path + "/slow.py", origin.path("slow/big.tar.gz"),
                                                  scratch.path])
        XCTAssertEqual(made.status, 0, made.stderr)
        try mount([origin.url("slow/big.tar.gz")], extra: ["--archives"])
        let listing = try BackgroundProcess("/bin/ls", [mountpoint + "/big.tar.gz"], logPath: scratch.path + "/ls.log")
        var seen: [String] = []
        var statusNote: String?
        let deadline = Date().addingTimeInterval(300)
        while Date() < deadline {
            let value = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.archive",
                                                            mountpoint + "/big.tar.gz"]).stdout
            if seen.last != value { seen.append(value) }
            if value.hasPrefix("indexed") { break }
            if statusNote == nil, let share = Self.share(in: value), share > 0, share < 100 {
                let files = try statusJSON()["files"] as? [[String: Any]] ?? []
                statusNote = files.compactMap { $0["note"] as? String }.first { $0.hasPrefix("archive indexing: ") }
            }
            usleep(50_000)
        }
        _ = listing.stop(timeout: 60)
        print("user.rangefs.archive while indexing: \(seen); status note: \(statusNote ?? "none")")
        XCTAssertTrue(seen.contains { Self.share(in: $0).map { $0 > 0 && $0 < 100 } ?? false },
                      "a share between 0 and 100% while indexing: \(seen)")
        XCTAssertTrue(seen.last?.hasPrefix("indexed: 8 members") ?? false, "\(seen)")
        XCTAssertNotNil(statusNote, "rangefs status shows the archive's progress in its note")
    }

    /// The percentage in `indexing: 42.0%`.
    private static func share(in value: String) -> Double? {
        guard value.hasPrefix("indexing: "), value.hasSuffix("%") else { return nil }
        return Double(value.dropFirst("indexing: ".count).dropLast())
    }
}
