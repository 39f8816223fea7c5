@testable import RangeFSArchives
import RangeFSTestSupport
import XCTest

/// GNU and pax tars read by their headers alone, a .tar.gz indexed in one pass with seek points and a member near
/// its end read from the nearest one, and hostile tars refused with the archive's name and the fault.
final class TarIndexReaderTests: XCTestCase {
    private func tar(_ name: String, limits: ArchiveLimits = ArchiveLimits()) throws -> (ArchiveIndex, CountingSource) {
        let source = CountingSource(ArchiveFixtures.bytes(name))
        return (try TarIndexReader(source: source, archive: name, limits: limits).index(), source)
    }

    private func tarGzip(_ name: String, limits: ArchiveLimits = ArchiveLimits()) throws -> (ArchiveIndex, CountingSource) {
        let source = CountingSource(ArchiveFixtures.bytes(name))
        var reader = TarGzipIndexReader(source: source, archive: name, limits: limits)
        reader.seekSpacing = 1 << 20
        return (try reader.index(), source)
    }

    func testGNUAndPaxTarsMatchTheTree() throws {
        for name in ["gnu.tar", "pax.tar"] {
            let (index, source) = try tar(name)
            XCTAssertEqual(index.format, .tar)
            try ArchiveFixtures.assertMatchesTree(index, source: source, archive: name)
        }
    }

    func testOnlyTheHeadersAreRead() throws {
        for name in ["gnu.tar", "pax.tar"] {
            let (index, source) = try tar(name)
            // One read per header; a long name's or a pax header's body (GNU's pax format writes one for every
            // member) read with the header after it: never a member's body.
            XCTAssertTrue(source.reads.allSatisfy { $0.count <= 1536 }, "\(name): \(source.reads.filter { $0.count > 1536 })")
            XCTAssertLessThanOrEqual(source.reads.count, (name == "pax.tar" ? 2 : 1) * index.members.count + 6, name)
            XCTAssertLessThan(source.reads.map(\.count).reduce(0, +), index.members.count * 1536 + 4096, name)
        }
    }

    func testTarGzipMatchesTheTreeWithSeekPoints() throws {
        let (index, source) = try tarGzip("gnu.tar.gz")
        XCTAssertEqual(index.format, .tarGzip)
        XCTAssertGreaterThan(index.seekPoints.count, 10, "a point every MiB of a 22 MB tar")
        try ArchiveFixtures.assertMatchesTree(index, source: source, archive: "gnu.tar.gz")
        XCTAssertEqual(try ArchiveIndex(decoding: index.encoded()), index, "the saved form keeps the seek points")
    }

    func testAMemberNearTheEndIsInflatedFromTheNearestSeekPoint() throws {
        let (index, source) = try tarGzip("gnu.tar.gz")
        let member = try XCTUnwrap(index.member(at: ["zz", "last.bin"]))
        guard case .gzip(let offset) = member.data else { return XCTFail("\(member.data)") }
        let nearest = try XCTUnwrap(index.seekPoints.last { $0.inflatedOffset <= offset })
        XCTAssertGreaterThan(nearest.inflatedOffset, 20 << 20, "the member sits after the 20 MB log")
        source.forget()
        let bytes = try ArchiveMemberReader(source: source, archive: "gnu.tar.gz", member: member,
                                            seekPoints: index.seekPoints).read(offset: 0, count: Int(member.size))
        XCTAssertEqual(Shell.sha256(of: Data(bytes)), ArchiveFixtures.tree["zz/last.bin"]?.sha256)
        let first = try XCTUnwrap(source.reads.map(\.offset).min())
        XCTAssertGreaterThanOrEqual(first, nearest.compressedOffset - 1, "inflate started at the point, not at 0")
        let fetched = source.reads.map(\.count).reduce(0, +)
        XCTAssertLessThan(fetched, 2 << 20, "the member's span and one point's distance: \(source.reads)")
    }

    func testConcatenatedGzipMembersReadAsOneStream() throws {
        let (index, source) = try tarGzip("hostile/two-members.tar.gz")
        XCTAssertEqual(index.members.map(\.pathString), ["one.txt", "two.txt"])
        for member in index.members {
            let bytes = try ArchiveMemberReader(source: source, archive: "two", member: member,
                                                seekPoints: index.seekPoints).read(offset: 0, count: 10_000)
            XCTAssertEqual(bytes.count, 4000)
        }
    }

    // MARK: Hostile tars

    func testNamesThatLeaveTheFolderAreLeftOut() throws {
        let (index, source) = try tar("hostile/names.tar")
        XCTAssertEqual(Set(index.members.map(\.pathString)), ["ok.txt", "hard.txt"])
        let hard = try XCTUnwrap(index.member(at: ["hard.txt"]))
        XCTAssertEqual(try ArchiveMemberReader(source: source, archive: "names.tar", member: hard)
            .read(offset: 0, count: 100), Array("fine\n".utf8), "a hard link reads its target")
        let reasons = Dictionary(index.refused.map { ($0.name, $0.reason) }, uniquingKeysWith: { $1 })
        XCTAssertEqual(reasons["../evil.txt"], "a '..' in its path")
        XCTAssertEqual(reasons["/abs.txt"], "an absolute path")
        XCTAssertEqual(reasons["ctl\u{1}.txt"], "a control character in its name")
        XCTAssertTrue(reasons["fifo"]?.hasPrefix("a tar member of type '6'") ?? false, "\(reasons)")
        XCTAssertTrue(index.refused.contains { $0.reason == "deeper than 64 folders" }, "30,000 folders deep")
        XCTAssertEqual(index.refusedCount, 5)
    }

    func testDamagedTarsFailWithTheArchiveAndTheFault() throws {
        let cases: [(String, Bool, String)] = [
            ("badsum.tar", false, "fails its checksum"),
            ("truncated.tar", false, "it ends inside member 'one.txt'"),
            ("garbage.tar.gz", true, "after the gzip stream are not gzip"),
            ("truncated.tar.gz", true, "it ends inside"),
        ]
        for (name, compressed, message) in cases {
            XCTAssertThrowsError(try compressed ? tarGzip("hostile/" + name) : tar("hostile/" + name), name) { error in
                XCTAssertEqual((error as? ArchiveError)?.archive, "hostile/" + name)
                XCTAssertTrue("\(error)".hasPrefix("archive hostile/\(name): "), "\(error)")
                XCTAssertTrue("\(error)".contains(message), "\(name): \(error)")
            }
        }
    }

    func testAPaxSizeNear2To63IsAFaultNotATrap() throws {
        XCTAssertThrowsError(try tar("hostile/pax-size-near-2-63.tar")) { error in
            guard case .malformed(let what)? = (error as? ArchiveError)?.fault else { return XCTFail("\(error)") }
            XCTAssertTrue(what.contains("a size of 9223372036854775296"), what)
        }
    }

    func testInflationIsBoundedByTheCompressedBytes() throws {
        XCTAssertThrowsError(try tarGzip("gnu.tar.gz", limits: ArchiveLimits(maximumInflationRatio: 2))) { error in
            guard case .inflationRatio? = (error as? ArchiveError)?.fault else { return XCTFail("\(error)") }
        }
    }

    func testSeekPointsAreThinnedToTheMemoryBound() throws {
        let (index, _) = try tarGzip("gnu.tar.gz", limits: ArchiveLimits(maximumIndexBytes: 1 << 20))
        XCTAssertLessThanOrEqual(index.seekPoints.count, 9, "a quarter of 1 MiB holds 8 windows")
        XCTAssertGreaterThan(index.seekPoints.count, 2)
    }
}
