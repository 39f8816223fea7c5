@testable import RangeFSArchives
import Foundation
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// An archive source that records every range asked for, so a test can say how an archive was read.
final class CountingSource: ArchiveSource {
    private let bytes: ByteArraySource
    private(set) var reads: [(offset: Int64, count: Int)] = []

    init(_ bytes: [UInt8]) {
        self.bytes = ByteArraySource(bytes)
    }

    var size: Int64 { bytes.size }

    func read(offset: Int64, count: Int) throws -> [UInt8] {
        reads.append((offset, count))
        return try bytes.read(offset: offset, count: count)
    }

    func forget() { reads = [] }
}

/// One path of the generated tree, as the fixture script saw it on disk.
struct TreeEntry: Decodable {
    var path: String
    var kind: String
    var size: Int64
    var mtime: Int64
    var mode: UInt32
    var sha256: String?
    var link: String?
}

/// A generated tree and the archives the real tools made of it (zip, python's zipfile, tar, xorriso), in a
/// temporary folder named after the script's CRC: made once, and kept for the next runs (about 100 MB).
enum ArchiveFixtures {
    static let folder: String = {
        let key = String(CRC32C.checksum(Array(fixtureScript.utf8)), radix: 16)
        let path = NSTemporaryDirectory() + "rangefs-archive-fixtures-" + key
        if FileManager.default.fileExists(atPath: path + "/complete") { return path }
        // Made aside and renamed into place, so a test process never sees another's half-made folder.
        let building = path + ".\(getpid())"
        _ = try? FileManager.default.removeItem(atPath: building)  // a leftover of a run with this pid, if any
        let script = building + ".py"
        _ = FileManager.default.createFile(atPath: script, contents: Data(fixtureScript.utf8))
        let result = try? Shell.run("/usr/bin/python3", [script, building], timeout: 600)
        precondition(result?.status == 0, "the archive fixture script failed: \(result?.stderr ?? "did not run")")
        _ = try? FileManager.default.removeItem(atPath: script)  // only the folder is needed
        if rename(building, path) != 0 {  // another test process made it first: use theirs
            _ = try? FileManager.default.removeItem(atPath: building)
        }
        return path
    }()

    /// The tree's entries, by path.
    static let tree: [String: TreeEntry] = {
        let data = FileManager.default.contents(atPath: folder + "/manifest.json")!
        let entries = try! JSONDecoder().decode([TreeEntry].self, from: data)
        return Dictionary(uniqueKeysWithValues: entries.map { ($0.path, $0) })
    }()

    static func bytes(_ name: String) -> [UInt8] {
        Array(FileManager.default.contents(atPath: folder + "/" + name) ?? Data())
    }

    /// Checks that `index` holds the tree: every path with its kind, size, date (to `timePrecision` seconds), mode
    /// when `modes`, link target and bytes (read through a member reader).
    static func assertMatchesTree(_ index: ArchiveIndex, source: any ArchiveSource, archive: String,
                                  timePrecision: Int64 = 0, modes: Bool = true,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let members = Dictionary(index.members.map { ($0.pathString, $0) }, uniquingKeysWith: { $1 })
        XCTAssertEqual(Set(members.keys), Set(tree.keys), "\(archive): the members' paths", file: file, line: line)
        for (path, entry) in tree {
            guard let member = members[path] else { continue }
            let kind: ArchiveMemberKind = entry.kind == "dir" ? .directory : entry.kind == "link" ? .symlink : .file
            XCTAssertEqual(member.kind, kind, "\(archive): \(path)", file: file, line: line)
            if kind != .directory {  // a folder's date changes as its files are made; tools differ on it
                XCTAssertLessThanOrEqual(abs(member.modificationTime - entry.mtime), timePrecision,
                                         "\(archive): \(path)'s date", file: file, line: line)
            }
            if modes && kind == .file {
                XCTAssertEqual(member.mode, entry.mode, "\(archive): \(path)'s mode", file: file, line: line)
            }
            if kind == .symlink { XCTAssertEqual(member.linkTarget, entry.link, "\(archive): \(path)", file: file, line: line) }
            guard kind == .file else { continue }
            XCTAssertEqual(member.size, entry.size, "\(archive): \(path)'s size", file: file, line: line)
            let reader = ArchiveMemberReader(source: source, archive: archive, member: member,
                                             seekPoints: index.seekPoints)
            let content = try reader.read(offset: 0, count: Int(member.size) + 1)
            XCTAssertEqual(Shell.sha256(of: Data(content)), entry.sha256, "\(archive): \(path)'s bytes",
                           file: file, line: line)
        }
    }

    /// Writes a tree of files (compressible text, random bytes, empty files, a 40 KB member, long and non-ASCII
    /// names, a symlink, a few MiB of text for seek points), its manifest, the tools' archives of it, and hostile
    /// archives made by editing good ones.
    static let fixtureScript = #"""
import hashlib, json, os, random, shutil, stat, struct, subprocess, sys, tarfile, time, zipfile
out = sys.argv[1]; tree = os.path.join(out, "tree"); os.makedirs(tree)
rng = random.Random(49)
base = 1_700_000_000
def put(rel, data, mtime):
    path = os.path.join(tree, rel); os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f: f.write(data)
    os.chmod(path, 0o755 if len(data) % 5 == 0 and data else 0o644)
    os.utime(path, (mtime, mtime))
for i in range(240):
    folder = f"d{i % 7}/sub{i % 3}"
    kind = i % 4
    if kind == 0: data = (f"line {i} of a text file that compresses well\n" * rng.randint(1, 400)).encode()
    elif kind == 1: data = rng.randbytes(rng.randint(1, 5000))
    elif kind == 2: data = b""
    else: data = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", str(i)]) for _ in range(rng.randint(1, 3000))).encode()
    put(f"{folder}/file{i:04d}.{['txt', 'bin', 'empty', 'words'][kind]}", data, base + 2 * i)
put("d1/member40k.bin", rng.randbytes(40 * 1024), base + 1000)
put("long/" + "x" * 150 + "/" + "y" * 120 + ".txt", b"a long name\n", base + 1002)
put("unicode/naïve café ü.txt", "é NFC\n".encode(), base + 1004)
words = ["archive", "member", "range", "block", "cache", "seek", "window", "inflate"]
put("big/text.log", "\n".join(" ".join(rng.choice(words) + str(rng.randint(0, 99999)) for _ in range(12)) for _ in range(150_000)).encode(), base + 1006)
put("zz/last.bin", rng.randbytes(40 * 1024), base + 1008)
os.symlink("../d0/sub0/file0000.txt", os.path.join(tree, "d1/link"))
os.utime(os.path.join(tree, "d1/link"), (base + 1010, base + 1010), follow_symlinks=False)
manifest = []
for folder, dirs, files in os.walk(tree):
    for name in dirs + files:
        path = os.path.join(folder, name); rel = os.path.relpath(path, tree); st = os.lstat(path)
        entry = {"path": rel, "mtime": int(st.st_mtime), "mode": stat.S_IMODE(st.st_mode), "size": 0}
        if stat.S_ISLNK(st.st_mode): entry.update(kind="link", link=os.readlink(path))
        elif stat.S_ISDIR(st.st_mode): entry.update(kind="dir")
        else:
            entry.update(kind="file", size=st.st_size)
            entry["sha256"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
        manifest.append(entry)
json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"))
run = lambda *args, **kw: subprocess.run(args, check=True, **kw)
# zip(1): deflated and stored (incompressible, empty) members, Info-ZIP's UTC times, symlinks kept.
run("zip", "-q", "-r", "-y", os.path.join(out, "tool.zip"), ".", cwd=tree)
# python's zipfile: stored and deflated by turns, DOS times (UTC), zip64 extra fields on every other member.
def python_zip(name, zip64):
    with zipfile.ZipFile(os.path.join(out, name), "w") as archive:
        for n, entry in enumerate(sorted(manifest, key=lambda e: e["path"])):
            info = zipfile.ZipInfo(entry["path"] + ("/" if entry["kind"] == "dir" else ""),
                                   time.gmtime(entry["mtime"])[:6])
            kind = {"dir": stat.S_IFDIR, "link": stat.S_IFLNK, "file": stat.S_IFREG}[entry["kind"]]
            info.external_attr = (kind | entry["mode"]) << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED if n % 2 else zipfile.ZIP_STORED
            path = os.path.join(tree, entry["path"])
            data = b"" if entry["kind"] == "dir" else os.readlink(path).encode() if entry["kind"] == "link" \
                else open(path, "rb").read()
            with archive.open(info, "w", force_zip64=zip64 and n % 2 == 0) as member: member.write(data)
python_zip("python.zip", False)
python_zip("zip64.zip", True)
# zip64's end records in front of the end record, whose fields then say "see zip64" (0xFFFF...).
data = open(os.path.join(out, "zip64.zip"), "rb").read(); end = data.rfind(b"PK\x05\x06")
_, _, _, _, count, size, offset, _ = struct.unpack("<IHHHHIIH", data[end:end + 22])
record = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, size, offset)
locator = struct.pack("<IIQI", 0x07064B50, 0, end, 1)
open(os.path.join(out, "zip64.zip"), "wb").write(data[:end] + record + locator
    + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
run("tar", "--format=gnu", "-cf", os.path.join(out, "gnu.tar"), "-C", tree, ".")
run("tar", "--format=pax", "-cf", os.path.join(out, "pax.tar"), "-C", tree, ".")
run("tar", "--format=gnu", "--sort=name", "-czf", os.path.join(out, "gnu.tar.gz"), "-C", tree, ".")
run("xorriso", "-as", "mkisofs", "-quiet", "-R", "-J", "-o", os.path.join(out, "tool.iso"), tree,
    stderr=subprocess.DEVNULL)
run("xorriso", "-as", "mkisofs", "-quiet", "-J", "-joliet-long", "-o", os.path.join(out, "joliet.iso"),
    os.path.join(tree, "d1"), stderr=subprocess.DEVNULL)
# Hostile archives.
hostile = os.path.join(out, "hostile"); os.makedirs(hostile)
def small_zip(name, names, method=zipfile.ZIP_DEFLATED):
    path = os.path.join(hostile, name)
    with zipfile.ZipFile(path, "w", method) as archive:
        for n in names:
            info = zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)); info.compress_type = method
            archive.writestr(info, ("content of " + n + "\n") * 50)
    return path
small_zip("names.zip", ["ok.txt", "../evil.txt", "/etc/passwd", "a/../../b.txt", "ctl\x01.txt",
                        "/".join(["deep"] * 100) + "/f.txt", "ok/.", "dup.txt", "dup.txt/inner.txt"])
def patched(name, source, edit):
    data = bytearray(open(source, "rb").read()); edit(data)
    open(os.path.join(hostile, name), "wb").write(data)
good = small_zip("good.zip", ["one.txt", "two.txt", "three.txt"])
def central(data, n):
    at = 0
    for _ in range(n + 1): at = data.index(b"PK\x01\x02", at + 1)
    return at
def overlap(data): data[central(data, 1) + 42:central(data, 1) + 46] = struct.pack("<I", 0)
patched("overlap.zip", good, overlap)
def bomb(data): data[central(data, 0) + 24:central(data, 0) + 28] = struct.pack("<I", 0x7FFFFFFF)
patched("bomb.zip", good, bomb)
def bad_record(data): data[central(data, 1)] = 0x51
patched("bad-directory.zip", good, bad_record)
def crc(data): data[central(data, 0) + 16] ^= 0xFF
patched("crc.zip", good, crc)
patched("crc-stored.zip", small_zip("stored.zip", ["one.txt", "two.txt"], zipfile.ZIP_STORED), crc)
def shorter(data): data[central(data, 0) + 24:central(data, 0) + 28] = struct.pack("<I", 100)
patched("shorter.zip", good, shorter)
def outside(data):
    end = data.rfind(b"PK\x05\x06"); data[end + 16:end + 20] = struct.pack("<I", 0x7FFFFFF0)
patched("directory-outside.zip", good, outside)
open(os.path.join(hostile, "truncated.zip"), "wb").write(open(good, "rb").read()[:-30])
import gzip, io
def small_tar(members, fmt=tarfile.GNU_FORMAT):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for name, kind, data in members:
            info = tarfile.TarInfo(name); info.type = kind; info.mtime = base; info.size = len(data)
            if kind == tarfile.LNKTYPE: info.linkname = "ok.txt"; info.size = 0
            archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buffer.getvalue()
def write(name, data): open(os.path.join(hostile, name), "wb").write(data)
write("names.tar", small_tar([("ok.txt", tarfile.REGTYPE, b"fine\n"), ("../evil.txt", tarfile.REGTYPE, b"x"),
    ("/abs.txt", tarfile.REGTYPE, b"x"), ("ctl\x01.txt", tarfile.REGTYPE, b"x"),
    ("a/" * 30000 + "deep.txt", tarfile.REGTYPE, b"x"), ("fifo", tarfile.FIFOTYPE, b""),
    ("hard.txt", tarfile.LNKTYPE, b"")], tarfile.PAX_FORMAT))
plain = small_tar([("one.txt", tarfile.REGTYPE, b"one\n" * 1000), ("two.txt", tarfile.REGTYPE, b"two\n" * 1000)])
badsum = bytearray(plain); badsum[0] ^= 1  # the first header no longer matches its checksum
write("badsum.tar", bytes(badsum))
write("truncated.tar", plain[:512 + 1000])
write("garbage.tar.gz", gzip.compress(plain) + b"garbage after the stream")
write("truncated.tar.gz", gzip.compress(plain)[:-100])
half = len(plain) // 2
write("two-members.tar.gz", gzip.compress(plain[:half]) + gzip.compress(plain[half:]))
huge = tarfile.TarInfo("huge.bin"); huge.size = 2**63 - 512; huge.mtime = base
buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive: archive.addfile(huge)
write("pax-size-near-2-63.tar", buffer.getvalue())
open(os.path.join(out, "complete"), "w").close()
"""#
}
