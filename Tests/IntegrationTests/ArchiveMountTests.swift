import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Archives shown as folders (`--archives`, issue 49): a zip, a tar.gz and an ISO of one generated tree, served by
/// nginx on 127.0.0.1 and mounted for real; the requests counted from nginx's access log.
final class ArchiveMountTests: MountTestCase {
    /// Makes the tree (2,000 files in 20 folders, compressible and random, a 40,000-byte `big/m40k.bin`, a symlink
    /// for tar and ISO), and `tree.zip` (members stored and deflated in turn), `tree.tar.gz` and `tree.iso` (Rock
    /// Ridge + Joliet) of it in the origin's root. Dates are even seconds: a zip keeps them to 2 s.
    static let makeArchives = #"""
    import os, sys, random, zipfile, tarfile, subprocess
    src, out = sys.argv[1], sys.argv[2]
    random.seed(49)
    when = 1_700_000_000
    for i in range(2000):
        folder = os.path.join(src, "dir%02d" % (i % 20))
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "f%04d.%s" % (i, "txt" if i % 2 else "bin"))
        size = random.randint(0, 20000)
        data = (("line %d of file %d\n" % (i, i)) * (size // 20 + 1)).encode()[:size] if i % 2 else random.randbytes(size)
        open(path, "wb").write(data)
        os.chmod(path, 0o600 if i % 3 == 0 else 0o644)
        os.utime(path, (when + 2 * i, when + 2 * i))
    os.makedirs(os.path.join(src, "big"), exist_ok=True)
    open(os.path.join(src, "big", "m40k.bin"), "wb").write(random.randbytes(40000))
    os.utime(os.path.join(src, "big", "m40k.bin"), (when, when))
    with zipfile.ZipFile(os.path.join(out, "tree.zip"), "w") as z:
        for n, (root, dirs, files) in enumerate(sorted(os.walk(src))):
            for k, name in enumerate(sorted(files)):
                path = os.path.join(root, name)
                z.write(path, os.path.relpath(path, src),
                        compress_type=zipfile.ZIP_DEFLATED if (n + k) % 2 else zipfile.ZIP_STORED)
    os.makedirs(os.path.join(src, "links"), exist_ok=True)
    os.symlink("../dir00/f0000.bin", os.path.join(src, "links", "to-f0000"))
    with tarfile.open(os.path.join(out, "tree.tar.gz"), "w:gz") as t:
        for entry in sorted(os.listdir(src)):
            t.add(os.path.join(src, entry), entry)
    subprocess.run(["xorriso", "-as", "mkisofs", "-R", "-J", "-quiet", "-o", os.path.join(out, "tree.iso"), src],
                   check=True, capture_output=True)
    """#

    /// Compares folder argv[2] of the mount with the tree argv[1]: the same names, and per file its size, date
    /// (to 2 s) and sha256, per symlink its target (argv[3] "nolinks": the tree's symlinks are not expected).
    static let compareTree = #"""
    import os, sys, hashlib
    src, mnt, links = sys.argv[1], sys.argv[2], sys.argv[3] != "nolinks"
    bad, count = [], 0
    def digest(p): return hashlib.sha256(open(p, "rb").read()).hexdigest()
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        want = sorted(n for n in dirs + files if links or not os.path.islink(os.path.join(root, n)))
        if not links and rel == "links": continue
        got = sorted(os.listdir(os.path.join(mnt, rel)))
        if [n for n in want if not (not links and n == "links")] != got: bad.append("names of %s: %s" % (rel, got[:5]))
        for name in files:
            a, b = os.path.join(root, name), os.path.join(mnt, rel, name)
            if os.path.islink(a):
                if links and os.readlink(a) != os.readlink(b): bad.append("link " + b)
                continue
            sa, sb = os.stat(a), os.stat(b)
            if sa.st_size != sb.st_size or abs(sa.st_mtime - sb.st_mtime) > 2 or digest(a) != digest(b) \
                    or sa.st_mode != sb.st_mode:
                bad.append("%s: %d %d %d %d %o %o" % (b, sa.st_size, sb.st_size, sa.st_mtime, sb.st_mtime,
                                                      sa.st_mode, sb.st_mode))
            count += 1
    print("checked", count, "bad", len(bad), bad[:5])
    sys.exit(1 if bad else 0)
    """#

    private var tree: String { scratch.path + "/tree" }

    private func makeArchives() throws {
        let script = scratch.path + "/make.py"
        try Self.makeArchives.write(toFile: script, atomically: true, encoding: .utf8)
        let made = try Shell.run("/usr/bin/env", ["python3", script, tree, origin.root], timeout: 300)
        XCTAssertEqual(made.status, 0, made.stderr)
    }

    /// Checks the folder `name` of the mount against the tree; returns how many files were compared.
    private func compare(_ name: String, links: Bool) throws {
        let script = scratch.path + "/compare.py"
        try Self.compareTree.write(toFile: script, atomically: true, encoding: .utf8)
        let result = try Shell.run("/usr/bin/env", ["python3", script, tree, mountpoint + "/" + name,
                                                    links ? "links" : "nolinks"], timeout: 600)
        print("\(name): \(result.stdout)")
        XCTAssertEqual(result.status, 0, "\(name): \(result.stdout) \(result.stderr)")
    }

    func testZipTarGzAndISOShowTheirTreeReadByRangeAndListOfflineAfterAKill() throws {
        try makeArchives()
        let names = ["tree.zip", "tree.tar.gz", "tree.iso"]
        origin.clearAccessLog()
        let daemon = try startForeground(names.map(origin.url), extra: ["--archives"])

        // The zip: its index and one 40 KB member cost at most 1 MiB from the origin.
        let member = try Data(contentsOf: URL(fileURLWithPath: tree + "/big/m40k.bin"))
        XCTAssertEqual(try fileBytes(mountpoint + "/tree.zip/big/m40k.bin", offset: 0, count: 1 << 20), [UInt8](member))
        let zipSent = bytesFetched("/tree.zip")
        print("zip: index and one 40 KB member: \(zipSent) bytes sent of \(try statFile(origin.path("tree.zip")).st_size)")
        XCTAssertLessThanOrEqual(zipSent, 1 << 20)

        // The tar.gz is read whole once to index it; then a member costs at most one seek window's distance.
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/tree.tar.gz").contains("big"))
        origin.clearAccessLog()
        XCTAssertEqual(try fileBytes(mountpoint + "/tree.tar.gz/big/m40k.bin", offset: 0, count: 1 << 20), [UInt8](member))
        print("tar.gz: one 40 KB member after indexing: \(bytesFetched("/tree.tar.gz")) bytes sent")
        XCTAssertLessThanOrEqual(bytesFetched("/tree.tar.gz"), 5 << 20)

        // The ISO: a member is its own blocks.
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/tree.iso").contains("big"))
        origin.clearAccessLog()
        XCTAssertEqual(try fileBytes(mountpoint + "/tree.iso/big/m40k.bin", offset: 0, count: 1 << 20), [UInt8](member))
        print("iso: one 40 KB member after indexing: \(bytesFetched("/tree.iso")) bytes sent")
        XCTAssertLessThanOrEqual(bytesFetched("/tree.iso"), 256 << 10)

        try compare("tree.zip", links: false)
        try compare("tree.tar.gz", links: true)
        try compare("tree.iso", links: true)
        XCTAssertEqual(try statFile(mountpoint + "/tree.zip").st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), names.sorted())
        let report = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.archive",
                                                         mountpoint + "/tree.tar.gz"])
        XCTAssertTrue(report.stdout.hasPrefix("indexed: 2024 members"), report.stdout + report.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: cache + "/archives").count, 3,
                       "each index kept in the cache")

        // kill -9, then a remount with the origin stopped: the folders list from the kept indexes, members read
        // from the cache: what was read is committed within a second (the group commit), so the kill waits 3 s.
        sleep(3)
        daemon.stop(signal: SIGKILL)
        XCTAssertEqual(try Shell.run("/bin/fusermount3", ["-uz", mountpoint]).status, 0)
        origin.halt()
        defer { if !origin.isRunning { try? origin.resume() } }
        try mount(names.map(origin.url), extra: ["--archives"])
        try compare("tree.zip", links: false)
        try compare("tree.tar.gz", links: true)
        try compare("tree.iso", links: true)

        // A member near the end of the tar.gz with the archive's blocks evicted (the mount keeps the index it holds;
        // evict deletes the kept one): inflated from the nearest seek point (every 4 MiB of tar), not from the start.
        try driver.unmount(mountpoint, cache: cache)
        try origin.resume()
        try mount(names.map(origin.url), extra: ["--archives"])
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/tree.tar.gz").contains("big"))
        XCTAssertEqual(try driver.run(["evict", "tree.tar.gz", "--mount", mountpoint]).status, 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: cache + "/archives").count, 2,
                       "evict deletes the archive's kept index")
        origin.clearAccessLog()
        let last = try Data(contentsOf: URL(fileURLWithPath: tree + "/dir19/f1999.txt"))
        XCTAssertEqual(try fileBytes(mountpoint + "/tree.tar.gz/dir19/f1999.txt", offset: 0, count: 1 << 20), [UInt8](last))
        let tarGzipSize = try statFile(origin.path("tree.tar.gz")).st_size
        print("tar.gz: a member at its end, blocks evicted: \(bytesFetched("/tree.tar.gz")) bytes sent of \(tarGzipSize)")
        XCTAssertLessThanOrEqual(bytesFetched("/tree.tar.gz"), 5 << 20)
    }

    /// A large member of a plain tar is a view onto the archive's blocks: read in order, it is fetched with the
    /// readahead of any file (a few large requests), not one request per READ of the kernel.
    func testALargeTarMemberIsReadWithReadahead() throws {
        let script = "import sys, os, tarfile\nopen(sys.argv[2], 'wb').write(os.urandom(32 << 20))\n"
            + "tarfile.open(sys.argv[1], 'w').add(sys.argv[2], 'big.bin')\n"
        try script.write(toFile: scratch.path + "/tar.py", atomically: true, encoding: .utf8)
        let member = scratch.path + "/big.bin"
        XCTAssertEqual(try Shell.run("/usr/bin/env", ["python3", scratch.path + "/tar.py", origin.path("big.tar"),
                                                      member]).status, 0)
        try mount([origin.url("big.tar")], extra: ["--archives"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/big.tar/big.bin"), try Shell.sha256(of: member))
        let requests = origin.accessLog().filter { $0.path == "/big.tar" && $0.status == 206 }.count
        print("tar: a 32 MiB member read in order took \(requests) requests, \(bytesFetched("/big.tar")) bytes")
        XCTAssertLessThanOrEqual(requests, 48, "read through the member reader, one request per READ: 53")
        XCTAssertLessThanOrEqual(bytesFetched("/big.tar"), (32 << 20) + (4 << 20))
    }

    /// An archive that changed on its server (another ETag) is indexed again at the next mount: its kept index
    /// is for the old version.
    func testAChangedArchiveIsIndexedAgain() throws {
        let script = #"""
        import sys, zipfile
        with zipfile.ZipFile(sys.argv[1], "w") as z:
            z.writestr(sys.argv[2], b"version " + sys.argv[2].encode())
        """#
        try script.write(toFile: scratch.path + "/one.py", atomically: true, encoding: .utf8)
        XCTAssertEqual(try Shell.run("/usr/bin/env", ["python3", scratch.path + "/one.py", origin.path("v.zip"),
                                                      "one.txt"]).status, 0)
        try mount([origin.url("v.zip")], extra: ["--archives"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/v.zip"), ["one.txt"])
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(try Shell.run("/usr/bin/env", ["python3", scratch.path + "/one.py", origin.path("v.zip"),
                                                      "two.txt"]).status, 0)
        // Another date too (nginx's ETag is the date and the length), as a real change has.
        XCTAssertEqual(try Shell.run("/usr/bin/touch", ["-d", "2030-01-01", origin.path("v.zip")]).status, 0)
        try mount([origin.url("v.zip")], extra: ["--archives"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/v.zip"), ["two.txt"])
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/v.zip/two.txt"]).stdout, "version two.txt")
    }

    /// Without `--archives` a zip is a plain file; a list-file line ending in `archives` makes that one file a
    /// folder of its members.
    func testWithoutTheOptionAZipIsAPlainFileAndAListLineCanAskForOne() throws {
        let digest = try origin.serveRandomFile("plain.zip", size: 300_000)
        try mount([origin.url("plain.zip")])
        XCTAssertEqual(try statFile(mountpoint + "/plain.zip").st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/plain.zip"), digest)
        try driver.unmount(mountpoint, cache: cache)

        let script = "import sys, zipfile\nzipfile.ZipFile(sys.argv[1], 'w').writestr('inside.txt', b'inside')\n"
        try script.write(toFile: scratch.path + "/zip.py", atomically: true, encoding: .utf8)
        XCTAssertEqual(try Shell.run("/usr/bin/env", ["python3", scratch.path + "/zip.py", origin.path("folder.zip")]).status, 0)
        let list = scratch.path + "/files.list"
        try "\(origin.url("folder.zip")) archives\n\(origin.url("plain.zip"))\n".write(toFile: list, atomically: true,
                                                                                     encoding: .utf8)
        try mount([], extra: ["--list", list])
        XCTAssertEqual(try statFile(mountpoint + "/plain.zip").st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/folder.zip"), ["inside.txt"])
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/folder.zip/inside.txt"]).stdout, "inside")
    }

    /// Hostile zips: names leaving the folder are left out (nothing appears outside it), a member whose bytes do
    /// not match its CRC-32 and a truncated zip give EIO and one log line naming the archive and the fault, and
    /// the daemon stays up.
    func testHostileZipsGiveEIOAndALogLineAndNothingEscapes() throws {
        let script = #"""
        import sys, zipfile, os
        out = sys.argv[1]
        with zipfile.ZipFile(os.path.join(out, "escape.zip"), "w") as z:
            z.writestr("../x", b"outside")
            z.writestr("/abs", b"absolute")
            z.writestr("good.txt", b"good")
        with zipfile.ZipFile(os.path.join(out, "badcrc.zip"), "w") as z:
            z.writestr("m.txt", b"A" * 5000)
        data = bytearray(open(os.path.join(out, "badcrc.zip"), "rb").read())
        data[40] ^= 0xFF
        open(os.path.join(out, "badcrc.zip"), "wb").write(data)
        with zipfile.ZipFile(os.path.join(out, "cut.zip"), "w") as z:
            z.writestr("m.txt", os.urandom(100000))
        data = open(os.path.join(out, "cut.zip"), "rb").read()
        open(os.path.join(out, "cut.zip"), "wb").write(data[:60000])
        # A bomb: 10,000 zeros deflated to a few bytes, whose headers claim 2 GB.
        with zipfile.ZipFile(os.path.join(out, "bomb.zip"), "w") as z:
            z.writestr("zeros", b"\0" * 10000, compress_type=zipfile.ZIP_DEFLATED)
        data = bytearray(open(os.path.join(out, "bomb.zip"), "rb").read())
        central = data.find(b"PK\x01\x02")
        data[central + 24:central + 28] = (2 << 30).to_bytes(4, "little")
        data[22:26] = (2 << 30).to_bytes(4, "little")
        open(os.path.join(out, "bomb.zip"), "wb").write(data)
        """#
        try script.write(toFile: scratch.path + "/hostile.py", atomically: true, encoding: .utf8)
        XCTAssertEqual(try Shell.run("/usr/bin/env", ["python3", scratch.path + "/hostile.py", origin.root]).status, 0)
        let names = ["escape.zip", "badcrc.zip", "cut.zip", "bomb.zip"]
        let daemon = try startForeground(names.map(origin.url), extra: ["--archives"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/escape.zip"), ["good.txt"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), names.sorted())
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/escape.zip/good.txt"]).stdout, "good")
        XCTAssertEqual(readError(mountpoint + "/badcrc.zip/m.txt", offset: 0, count: 65536), EIO)
        let listing = try Shell.run("/bin/ls", [mountpoint + "/cut.zip"])
        XCTAssertNotEqual(listing.status, 0)
        XCTAssertTrue(listing.stderr.contains("Input/output error"), listing.stderr)
        var info = stat()
        XCTAssertEqual(stat(mountpoint + "/cut.zip/m.txt", &info), -1)
        XCTAssertEqual(errno, EIO)
        // The bomb is refused when it is indexed: its member is never inflated.
        let bomb = try Shell.run("/bin/ls", [mountpoint + "/bomb.zip"])
        XCTAssertTrue(bomb.stdout.isEmpty, "no member of the bomb shows: \(bomb.stdout)")
        XCTAssertTrue(daemon.isRunning, "the daemon stays up")
        XCTAssertEqual(try Shell.run("/bin/cat", [mountpoint + "/escape.zip/good.txt"]).stdout, "good")
        let deadline = Date().addingTimeInterval(20)
        var log = ""
        repeat {
            log = (try? String(contentsOfFile: scratch.path + "/daemon.log", encoding: .utf8)) ?? ""
            if log.contains("archive badcrc.zip") && log.contains("archive cut.zip") && log.contains("archive bomb.zip") {
                break
            }
            usleep(100_000)
        } while Date() < deadline
        print(log.split(separator: "\n").filter { $0.contains("archive ") }.joined(separator: "\n"))
        XCTAssertTrue(log.contains("archive escape.zip"), "the names left out are logged")
        XCTAssertTrue(log.contains("archive badcrc.zip") && log.contains("CRC-32"), log)
        XCTAssertTrue(log.contains("archive cut.zip"), log)
        XCTAssertTrue(log.contains("archive bomb.zip"), log)
    }
}
