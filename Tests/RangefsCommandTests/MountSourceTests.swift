@testable import rangefs
import XCTest

/// What the user names to mount: `NAME=URL`, list files, and sizes. (Moved here with the types from the core.)
final class MountSourceTests: XCTestCase {
    func testMountSourcesAndListFiles() throws {
        XCTAssertEqual(try MountSource(parsing: "movie.mp4=http://h/v?id=3"), MountSource(url: "http://h/v?id=3", name: "movie.mp4"))
        XCTAssertEqual(try MountSource(parsing: "http://h/v?id=3"), MountSource(url: "http://h/v?id=3"))
        XCTAssertEqual(try MountSource(parsing: "http://h/v?next=http://i/w"), MountSource(url: "http://h/v?next=http://i/w"))
        XCTAssertEqual(try MountSource(parsing: "a:b=http://h/v"), MountSource(url: "http://h/v", name: "a:b"))
        let list = try MountSource.parseList("# files\n\nhttp://h/a\n  b.bin=https://h/b  \n#http://h/c\n")
        XCTAssertEqual(list, [MountSource(url: "http://h/a"), MountSource(url: "https://h/b", name: "b.bin")])
    }

    func testAURLIsFollowedByItsMirrors() throws {
        XCTAssertEqual(try MountSource(parsing: "big.iso=http://a/big.iso https://b/big.iso\thttp://c/x.iso"),
                       MountSource(url: "http://a/big.iso", name: "big.iso",
                                   mirrors: ["https://b/big.iso", "http://c/x.iso"]))
        XCTAssertEqual(try MountSource(parsing: "http://a/f http://b/f"), MountSource(url: "http://a/f", mirrors: ["http://b/f"]))
        // A lone URL with a raw space stays one URL, so that it gets the message about percent-encoding.
        XCTAssertEqual(try MountSource(parsing: "http://a/my file.iso"), MountSource(url: "http://a/my file.iso"))
        let list = try MountSource.parseList("isos/big.iso=http://a/big.iso http://b/big.iso\n")
        XCTAssertEqual(list, [MountSource(url: "http://a/big.iso", name: "isos/big.iso", mirrors: ["http://b/big.iso"])])
    }

    func testADigestMayFollowTheURLsAndABadOneIsNamedWithItsFix() throws {
        let hex = String(repeating: "0a", count: 32)
        XCTAssertEqual(try MountSource(parsing: "iso=http://a/x.iso http://b/x.iso sha256=\(hex.uppercased())"),
                       MountSource(url: "http://a/x.iso", name: "iso", mirrors: ["http://b/x.iso"], checksum: "sha256=" + hex))
        XCTAssertEqual(try MountSource(parsing: "http://a/x.iso sha256=\(hex)"),
                       MountSource(url: "http://a/x.iso", checksum: "sha256=" + hex))
        let list = try MountSource.parseList("x.iso=http://a/x.iso\tsha512=\(hex + hex)\n")
        XCTAssertEqual(list.first?.checksum, "sha512=" + hex + hex)
        XCTAssertThrowsError(try MountSource.parseList("http://a/x.iso sha256=abc\n", path: "my.list")) { error in
            XCTAssertEqual((error as? MountSourceError)?.message,
                           "my.list line 1: " + MountSource.checksumProblem("sha256=abc"))
        }
    }

    func testAnUnsafeNameIsTheErrorNotTheURL() {
        for (text, name) in [("../../etc/x=http://h/a", "../../etc/x"), ("a/b=https://u:pw@h/a", "a/b"), ("..=http://h/", "..")] {
            XCTAssertThrowsError(try MountSource(parsing: text)) { error in
                let message = (error as? MountSourceError)?.message ?? ""
                XCTAssertTrue(message.contains("the name '\(name)' cannot name a file"), message)
                XCTAssertFalse(message.contains("pw@"), "credentials stay hidden: \(message)")
            }
        }
        XCTAssertThrowsError(try MountSource.parseList("http://h/a\n\nmovies/../a.mp4=http://h/b\n", path: "list.txt")) { error in
            let message = (error as? MountSourceError)?.message ?? ""
            XCTAssertTrue(message.hasPrefix("list.txt line 3: "), message)
            XCTAssertTrue(message.contains("the name 'movies/../a.mp4' cannot name a file"), message)
        }
        XCTAssertThrowsError(try MountSource.parseList("/abs/a.mp4=http://h/b\n")) { error in
            XCTAssertTrue(((error as? MountSourceError)?.message ?? "").contains("empty part"))
        }
        // In a list file a name may place its file in folders; on the command line it may not.
        XCTAssertEqual(try MountSource.parseList("movies/2026/a.mp4=http://h/b\n"),
                       [MountSource(url: "http://h/b", name: "movies/2026/a.mp4")])
        XCTAssertThrowsError(try MountSource(parsing: "movies/a.mp4=http://h/b"))
    }

    func testByteSizes() {
        XCTAssertEqual(ByteSize.parse("64K"), 65536)
        XCTAssertEqual(ByteSize.parse("1m"), 1 << 20)
        XCTAssertEqual(ByteSize.parse("4096"), 4096)
        XCTAssertNil(ByteSize.parse("lots"))
    }

    func testAListLineEndingInArchivesAsksForItsArchiveAsAFolder() throws {
        let list = try MountSource.parseList("data=http://a/x.zip http://b/x.zip archives\nhttp://a/y.zip\n")
        XCTAssertEqual(list.map(\.archives), [true, false])
        XCTAssertEqual(list.first?.mirrors, ["http://b/x.zip"])
        XCTAssertEqual(list.first?.name, "data")
    }

    /// `rangefs add URL [MIRROR...] [sha256=HEX] archives` reads its arguments as a list file's line.
    func testAnAddEndingInArchivesAsksForItsArchiveAsAFolder() throws {
        let digest = "sha256=" + String(repeating: "ab", count: 32)
        let source = try MountSource(parsingLine: "http://a/x.zip \(digest) archives")
        XCTAssertTrue(source.archives)
        XCTAssertEqual(source.url, "http://a/x.zip")
        XCTAssertNotNil(source.checksum)
        XCTAssertFalse(try MountSource(parsingLine: "http://a/archives").archives, "a URL is never the word")
    }
}
