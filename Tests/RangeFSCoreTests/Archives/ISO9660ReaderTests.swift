@testable import RangeFSArchives
import RangeFSTestSupport
import XCTest

/// Images made by xorriso (Rock Ridge and Joliet, Joliet alone) read folder by folder by range: every member's
/// bytes, size, date, mode and symlink as the tree; one read per folder; hostile images refused or bounded.
final class ISO9660ReaderTests: XCTestCase {
    private func reader(_ bytes: [UInt8], _ name: String) -> (ISO9660Reader, CountingSource) {
        let source = CountingSource(bytes)
        return (ISO9660Reader(source: source, archive: name, limits: ArchiveLimits()), source)
    }

    func testRockRidgeImageMatchesTheTree() throws {
        let (iso, source) = reader(ArchiveFixtures.bytes("tool.iso"), "tool.iso")
        guard case .rockRidge = try iso.volume().names else { return XCTFail("Rock Ridge not found") }
        let index = try iso.index()
        XCTAssertEqual(index.format, .iso9660)
        try ArchiveFixtures.assertMatchesTree(index, source: source, archive: "tool.iso")
    }

    func testJolietNamesWithoutRockRidge() throws {
        var (iso, source) = reader(ArchiveFixtures.bytes("joliet.iso"), "joliet.iso")
        iso.rockRidge = false
        guard case .joliet = try iso.volume().names else { return XCTFail("Joliet not found") }
        let index = try iso.index()
        let expected = ArchiveFixtures.tree.filter { $0.key.hasPrefix("d1/") && $0.value.kind == "file" }
        XCTAssertGreaterThan(expected.count, 30)
        for (path, entry) in expected {
            let member = try XCTUnwrap(index.member(at: Array(path.split(separator: "/").dropFirst().map(String.init))),
                                       path)
            XCTAssertEqual(member.size, entry.size, path)
            XCTAssertEqual(member.modificationTime, entry.mtime, path)
            let bytes = try ArchiveMemberReader(source: source, archive: "joliet.iso", member: member)
                .read(offset: 0, count: Int(member.size))
            XCTAssertEqual(Shell.sha256(of: Data(bytes)), entry.sha256, path)
        }
    }

    func testAFolderIsOneReadAndAFileItsOwnBlocks() throws {
        let (iso, source) = reader(ArchiveFixtures.bytes("tool.iso"), "tool.iso")
        let (root, names) = try iso.volume()
        source.forget()
        let top = try iso.members(of: root, names: names)
        XCTAssertEqual(Set(top.map(\.name)), Set(ArchiveFixtures.tree.keys.filter { !$0.contains("/") }))
        XCTAssertEqual(source.reads.count, 1, "\(source.reads)")
        let d1 = try XCTUnwrap(top.first { $0.name == "d1" }?.member)
        guard case .stored(let offset, let length) = d1.data else { return XCTFail("\(d1.data)") }
        let member = try XCTUnwrap(try iso.members(of: .init(offset: offset, length: length), names: names)
            .first { $0.name == "member40k.bin" }?.member)
        source.forget()
        let bytes = try ArchiveMemberReader(source: source, archive: "tool.iso", member: member)
            .read(offset: 0, count: Int(member.size))
        XCTAssertEqual(Shell.sha256(of: Data(bytes)), ArchiveFixtures.tree["d1/member40k.bin"]?.sha256)
        XCTAssertEqual(source.reads.map(\.count).reduce(0, +), 40 * 1024, "only the file's bytes")
    }

    // MARK: Hostile images

    func testAFolderThatNamesItsAncestorDoesNotLoop() throws {
        var bytes = ArchiveFixtures.bytes("tool.iso")
        let (iso, _) = reader(bytes, "loop.iso")
        let (root, names) = try iso.volume()
        let d0 = try XCTUnwrap(try iso.members(of: root, names: names).first { $0.name == "d0" }?.member)
        guard case .stored(let d0Offset, _) = d0.data else { return XCTFail() }
        // d0's record in the root folder now points at the root's own records.
        var position = Int(root.offset)
        var patched = false
        while position < Int(root.offset + root.length) {
            let length = Int(bytes[position])
            if length == 0 { position = (position / 2048 + 1) * 2048; continue }
            if bytes.littleEndian32(at: position + 2) == UInt32(d0Offset / 2048) {
                let lba = UInt32(root.offset / 2048)
                for shift in 0..<4 {
                    bytes[position + 2 + shift] = UInt8(truncatingIfNeeded: lba >> (8 * shift))
                    bytes[position + 9 - shift] = UInt8(truncatingIfNeeded: lba >> (8 * shift))
                }
                patched = true
            }
            position += length
        }
        XCTAssertTrue(patched)
        let index = try ISO9660Reader(source: ByteArraySource(bytes), archive: "loop.iso", limits: ArchiveLimits())
            .index()
        XCTAssertTrue(index.refused.contains { $0.name == "d0" && $0.reason.contains("loop") }, "\(index.refused)")
        XCTAssertFalse(index.members.contains { $0.path.first == "d0" && $0.path.count > 1 })
    }

    func testRockRidgeNamesAreCheckedAsListedNames() throws {
        var bytes = ArchiveFixtures.bytes("tool.iso")
        // The NM entries of two files renamed in place: "member40k/bin" and ".." plus padding bytes of the same
        // length are not names a folder can list.
        for (old, new) in [("member40k.bin", "member40k/bin"), ("last.bin", "..\u{1}\u{1}\u{1}\u{1}\u{1}\u{1}")] {
            let needle = Array("NM".utf8) + [UInt8(5 + old.utf8.count), 1, 0] + Array(old.utf8)
            let at = try XCTUnwrap((0...(bytes.count - needle.count)).first { bytes[$0..<($0 + needle.count)]
                .elementsEqual(needle) }, old)
            bytes.replaceSubrange((at + 5)..<(at + needle.count), with: Array(new.utf8))
        }
        let index = try ISO9660Reader(source: ByteArraySource(bytes), archive: "names.iso", limits: ArchiveLimits())
            .index()
        let reasons = Dictionary(index.refused.map { ($0.name, $0.reason) }, uniquingKeysWith: { $1 })
        XCTAssertEqual(reasons["d1/member40k/bin"], "its name holds '/' (%2F)")
        XCTAssertEqual(reasons["zz/..\u{1}\u{1}\u{1}\u{1}\u{1}\u{1}"], "a control character in its name")
        XCTAssertNil(index.member(at: ["d1", "member40k"]))
        XCTAssertNotNil(index.member(at: ["d1", "link"]), "the folder's other members are kept")
    }

    func testDamagedImagesFailWithTheArchiveAndTheFault() throws {
        let image = ArchiveFixtures.bytes("tool.iso")
        let cases: [(String, [UInt8], String)] = [
            ("cut.iso", Array(image.prefix(18 * 2048)), "it ends inside the folder"),
            ("zip.iso", ArchiveFixtures.bytes("hostile/good.zip"), "it ends inside the volume descriptors"),
            ("zeros.iso", [UInt8](repeating: 0, count: 40 * 2048), "not an ISO 9660 image"),
        ]
        for (name, bytes, message) in cases {
            XCTAssertThrowsError(try ISO9660Reader(source: ByteArraySource(bytes), archive: name,
                                                   limits: ArchiveLimits()).index(), name) { error in
                XCTAssertTrue("\(error)".hasPrefix("archive \(name): "), "\(error)")
                XCTAssertTrue("\(error)".contains(message), "\(name): \(error)")
            }
        }
    }
}
