@testable import RangeFSArchives
import RangeFSTestSupport
import XCTest

/// Zips made by zip(1) and python's zipfile (stored, deflated, zip64) read by range: every member's bytes, size,
/// date and mode as the tree they were made from; the directory in at most three reads; one member's read inside
/// its own span; and hostile zips refused with the archive's name and the fault.
final class ZipIndexReaderTests: XCTestCase {
    private func index(_ name: String, limits: ArchiveLimits = ArchiveLimits()) throws -> (ArchiveIndex, CountingSource) {
        let source = CountingSource(ArchiveFixtures.bytes(name))
        return (try ZipIndexReader(source: source, archive: name, limits: limits).index(), source)
    }

    func testZipToolArchiveMatchesTheTree() throws {
        let (index, source) = try index("tool.zip")
        XCTAssertEqual(index.format, .zip)
        try ArchiveFixtures.assertMatchesTree(index, source: source, archive: "tool.zip")
    }

    func testStoredAndDeflatedMembersOfPythonsZipfile() throws {
        let (index, source) = try index("python.zip")
        let kinds = Set(index.members.compactMap { member -> Bool? in
            if case .zip(_, _, let deflated, _) = member.data, member.size > 0 { return deflated }
            return nil
        })
        XCTAssertEqual(kinds, [false, true], "both stored and deflated members")
        try ArchiveFixtures.assertMatchesTree(index, source: source, archive: "python.zip", timePrecision: 1)
    }

    func testZip64EndRecordsAndExtraFields() throws {
        let (index, source) = try index("zip64.zip")
        // The tail (which holds this directory), and the symlink's local header and target.
        XCTAssertLessThanOrEqual(source.reads.count, 3, "\(source.reads)")
        try ArchiveFixtures.assertMatchesTree(index, source: source, archive: "zip64.zip", timePrecision: 1)
    }

    func testCentralDirectoryIsReadInAtMostThreeReads() throws {
        for name in ["tool.zip", "python.zip", "zip64.zip"] {
            let (index, source) = try index(name)
            XCTAssertGreaterThan(index.members.count, 250, name)
            // The symlink's target is its data: one more read of its local header and one of its bytes.
            let links = index.members.filter { $0.kind == .symlink }.count
            XCTAssertLessThanOrEqual(source.reads.count, 3 + 2 * links, "\(name): \(source.reads)")
        }
    }

    func testOneMembersReadTouchesOnlyItsSpan() throws {
        for name in ["tool.zip", "python.zip"] {
            let (index, source) = try index(name)
            let member = try XCTUnwrap(index.member(at: ["d1", "member40k.bin"]))
            guard case .zip(let localHeader, let compressed, _, _) = member.data else { return XCTFail(name) }
            source.forget()
            let bytes = try ArchiveMemberReader(source: source, archive: name, member: member)
                .read(offset: 0, count: 40 * 1024)
            XCTAssertEqual(Shell.sha256(of: Data(bytes)), ArchiveFixtures.tree["d1/member40k.bin"]?.sha256)
            let span = localHeader..<(localHeader + 30 + 200 + compressed)
            for read in source.reads {
                XCTAssertTrue(span.contains(read.offset) && read.offset + Int64(read.count) <= span.upperBound,
                              "\(name): read \(read) outside the member's span \(span)")
            }
            XCTAssertLessThanOrEqual(source.reads.map(\.count).reduce(0, +), 40 * 1024 + 1024, "\(name)")
        }
    }

    func testAReadInsideADeflatedMemberContinuesItsStream() throws {
        let (index, source) = try index("tool.zip")
        let member = try XCTUnwrap(index.member(at: ["big", "text.log"]))
        let reader = ArchiveMemberReader(source: source, archive: "tool.zip", member: member)
        let whole = try reader.read(offset: 0, count: Int(member.size))
        let middle = try reader.read(offset: member.size / 2, count: 100_000)
        XCTAssertEqual(middle, Array(whole[Int(member.size / 2)..<(Int(member.size / 2) + 100_000)]))
        source.forget()
        _ = try reader.read(offset: member.size / 2 + 100_000, count: 1000)
        XCTAssertLessThanOrEqual(source.reads.count, 1, "reading on from where the last read ended restarts nothing")
    }

    // MARK: Hostile zips

    func testNamesThatLeaveTheFolderAreLeftOut() throws {
        let (index, _) = try index("hostile/names.zip")
        let paths = Set(index.members.map(\.pathString))
        XCTAssertEqual(paths, ["ok.txt", "ok", "dup.txt"])
        XCTAssertEqual(index.refusedCount, 6)
        let reasons = Dictionary(index.refused.map { ($0.name, $0.reason) }, uniquingKeysWith: { $1 })
        XCTAssertEqual(reasons["../evil.txt"], "a '..' in its path")
        XCTAssertEqual(reasons["/etc/passwd"], "an absolute path")
        XCTAssertEqual(reasons["a/../../b.txt"], "a '..' in its path")
        XCTAssertEqual(reasons["ctl\u{1}.txt"], "a control character in its name")
        XCTAssertEqual(reasons["dup.txt/inner.txt"], "its folder 'dup.txt' is a file in the archive")
        XCTAssertTrue(index.refused.contains { $0.reason == "deeper than 64 folders" })
    }

    func testDamagedZipsFailWithTheArchiveAndTheFault() throws {
        let cases: [(String, (ArchiveFault) -> Bool)] = [
            ("overlap.zip", { if case .overlapping = $0 { true } else { false } }),
            ("bomb.zip", { if case .inflationRatio = $0 { true } else { false } }),
            ("bad-directory.zip", { if case .malformed(let what) = $0 { what.contains("central directory") } else { false } }),
            ("directory-outside.zip", { if case .malformed(let what) = $0 { what.contains("outside") } else { false } }),
            ("truncated.zip", { if case .malformed(let what) = $0 { what.contains("not a zip") } else { false } }),
        ]
        for (name, expected) in cases {
            XCTAssertThrowsError(try index("hostile/" + name), name) { error in
                let archiveError = error as? ArchiveError
                XCTAssertEqual(archiveError?.archive, "hostile/" + name)
                XCTAssertTrue(archiveError.map { expected($0.fault) } ?? false, "\(name): \(error)")
                XCTAssertTrue("\(error)".hasPrefix("archive hostile/\(name): "), "\(error)")
            }
        }
    }

    func testMemberDataThatDoesNotCheckOutFailsItsRead() throws {
        for (name, reason) in [("crc.zip", "CRC-32"), ("crc-stored.zip", "CRC-32"), ("shorter.zip", "more than its 100 bytes")] {
            let (index, source) = try index("hostile/" + name)
            let member = try XCTUnwrap(index.member(at: ["one.txt"]))
            let reader = ArchiveMemberReader(source: source, archive: name, member: member)
            XCTAssertThrowsError(try reader.read(offset: 0, count: Int(member.size)), name) { error in
                guard case .badMemberData(let path, let text)? = (error as? ArchiveError)?.fault else {
                    return XCTFail("\(name): \(error)")
                }
                XCTAssertEqual(path, "one.txt")
                XCTAssertTrue(text.contains(reason), "\(name): \(text)")
            }
            // The other members still read.
            let two = try XCTUnwrap(index.member(at: ["two.txt"]))
            XCTAssertEqual(try ArchiveMemberReader(source: source, archive: name, member: two)
                .read(offset: 0, count: 10_000).count, Int(two.size))
        }
    }

    func testSizesNear2To63AreFaultsNotTraps() throws {
        // One central record whose zip64 extra field gives sizes of 2^63 - 1, over a 30-byte local header.
        var record: [UInt8] = [0x50, 0x4B, 0x01, 0x02, 0x1E, 0x03, 45, 0, 0, 0, 8, 0, 0, 0, 0x21, 0, 0, 0, 0, 0]
        record += [UInt8](repeating: 0xFF, count: 8) + [1, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        record += Array("x".utf8) + [1, 0, 16, 0] + [UInt8](repeating: 0xFF, count: 7) + [0x7F]
            + [UInt8](repeating: 0xFF, count: 7) + [0x7F]
        let local: [UInt8] = [0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 26)
        let end: [UInt8] = [0x50, 0x4B, 0x05, 0x06, 0, 0, 0, 0, 1, 0, 1, 0, UInt8(record.count), 0, 0, 0, 30, 0, 0, 0, 0, 0]
        XCTAssertThrowsError(try ZipIndexReader(source: ByteArraySource(local + record + end), archive: "huge.zip",
                                                limits: ArchiveLimits()).index()) { error in
            XCTAssertEqual((error as? ArchiveError)?.fault, .overlapping(member: "x"))
        }
        // A read's count of Int.max from inside a member reads to the member's end.
        let (index, source) = try index("tool.zip")
        let member = try XCTUnwrap(index.member(at: ["d1", "member40k.bin"]))
        let tail = try ArchiveMemberReader(source: source, archive: "tool.zip", member: member)
            .read(offset: 1, count: .max)
        XCTAssertEqual(tail.count, 40 * 1024 - 1)
    }

    func testMemberCountAndIndexMemoryAreBounded() throws {
        XCTAssertThrowsError(try index("tool.zip", limits: ArchiveLimits(maximumMembers: 100))) { error in
            XCTAssertEqual((error as? ArchiveError)?.fault, .tooManyMembers(limit: 100))
        }
        XCTAssertThrowsError(try index("tool.zip", limits: ArchiveLimits(maximumIndexBytes: 20_000))) { error in
            guard case .indexTooLarge? = (error as? ArchiveError)?.fault else { return XCTFail("\(error)") }
        }
    }
}

/// The saved form of an index reads back the same, and any damaged byte is caught.
final class ArchiveIndexCodingTests: XCTestCase {
    func testSavedIndexReadsBackAndDamageIsCaught() throws {
        let index = try ZipIndexReader(source: ByteArraySource(ArchiveFixtures.bytes("hostile/names.zip")),
                                       archive: "names.zip", limits: ArchiveLimits()).index()
        var withPoints = index
        withPoints.seekPoints = [GzipSeekPoint(inflatedOffset: 1 << 20, compressedOffset: 300_000, bits: 3,
                                               window: Array(repeating: 7, count: 32 << 10))]
        for original in [index, withPoints] {
            let saved = original.encoded()
            XCTAssertEqual(try ArchiveIndex(decoding: saved), original)
            for position in stride(from: 0, to: saved.count, by: max(1, saved.count / 200)) {
                var damaged = saved
                damaged[position] ^= 0x20
                XCTAssertThrowsError(try ArchiveIndex(decoding: damaged), "byte \(position)")
            }
            XCTAssertThrowsError(try ArchiveIndex(decoding: Array(saved.dropLast(5))))
        }
    }
}
