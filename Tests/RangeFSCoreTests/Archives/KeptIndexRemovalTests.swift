import Foundation
@testable import RangeFSArchives
@testable import RangeFSControl
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// The index kept for an archive (cache `archives/`) is deleted with the archive's entry: `rangefs rm` and
/// `rangefs evict` leave nothing of it in the cache (issue 49). `rm --keep-data` keeps it, as it keeps the data.
final class KeptIndexRemovalTests: FolderTestCase {
    override class var folderPrefix: String { "kept-index" }

    private let index = ArchiveIndex(format: .tar, members: [
        ArchiveMember(path: ["a.txt"], kind: .file, size: 3, modificationTime: 1_700_000_000, mode: 0o644,
                      linkTarget: nil, data: .stored(offset: 512, length: 3)),
    ])

    func testRmEvictAndRmKeepingDataOfAnArchive() throws {
        let origin = MemoryOrigin()
        let urls = ["http://origin/rm.tar", "http://origin/evict.tar", "http://origin/kept.tar"]
        for url in urls { origin.serve(url, bytes: pseudoRandomBytes(count: 4096)) }
        let fileSystem = try makeTestFileSystem(origin: origin, urls: urls, directory: directory.path)
        let control = ControlService(fileSystem: fileSystem)
        for url in urls { try fileSystem.store.saveArchiveIndex(index.encoded(), url: url, version: "v") }
        func kept(_ url: String) -> Bool { fileSystem.store.savedArchiveIndex(url: url, version: "v") != nil }
        XCTAssertTrue(urls.allSatisfy(kept))

        XCTAssertTrue(control.handle(ControlRequest(command: .rm, name: "rm.tar")).ok)
        XCTAssertFalse(kept(urls[0]), "rm deletes the kept index")
        XCTAssertTrue(control.handle(ControlRequest(command: .evict, name: "evict.tar")).ok)
        XCTAssertFalse(kept(urls[1]), "evict deletes the kept index")
        XCTAssertTrue(control.handle(ControlRequest(command: .rm, name: "kept.tar", keepData: true)).ok)
        XCTAssertTrue(kept(urls[2]), "rm --keep-data keeps it with the data")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/archives")
        XCTAssertEqual(left.count, 1, "\(left)")
    }
}
