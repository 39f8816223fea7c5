import Foundation
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSControl
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// What the archives work left (issue 49): a URL given with `archives` (a list-file line, `rangefs add`) is kept
/// with it in the saved set, and the index kept for an archive goes with its entry (`rangefs rm`, `evict`).
final class ArchiveMarksTests: FolderTestCase {
    override class var folderPrefix: String { "archive-marks" }

    func testAnAddWithArchivesShowsAFolderAndIsSavedWithItUntilRemoved() throws {
        let origin = MemoryOrigin()
        let marked = "http://origin/marked.zip", plain = "http://origin/plain.zip"
        origin.serve(marked, bytes: pseudoRandomBytes(count: 1000))
        origin.serve(plain, bytes: pseudoRandomBytes(count: 1000))
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [], directory: directory.path)
        let control = ControlService(fileSystem: fileSystem)
        XCTAssertTrue(control.handle(ControlRequest(command: .add, url: marked, archives: true)).ok)
        XCTAssertTrue(control.handle(ControlRequest(command: .add, url: plain)).ok)
        let markedItem = try XCTUnwrap(fileSystem.catalog.item(url: marked))
        let plainItem = try XCTUnwrap(fileSystem.catalog.item(url: plain))
        XCTAssertNotNil(fileSystem.archiveItem(markedItem.inode), "added with archives: a folder")
        XCTAssertNil(fileSystem.archiveItem(plainItem.inode), "added without: a file")
        let saved = try SavedSet(store: fileSystem.store).files()
        XCTAssertEqual(saved.first { $0.url == marked }?.archives, true, "kept for a remount without URLs")
        XCTAssertNil(saved.first { $0.url == plain }?.archives)

        XCTAssertTrue(control.handle(ControlRequest(command: .rm, name: "marked.zip")).ok)
        XCTAssertFalse(fileSystem.showsArchives(of: marked), "removed: added again without archives, it is a file")
        XCTAssertTrue(control.handle(ControlRequest(command: .add, url: marked)).ok)
        XCTAssertNil(fileSystem.archiveItem(try XCTUnwrap(fileSystem.catalog.item(url: marked)).inode))
    }

    func testADirectoryMarkedWithOrWithoutItsSlashCoversTheArchivesUnderIt() throws {
        let origin = MemoryOrigin()
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [], directory: directory.path)
        fileSystem.showArchives(of: "http://origin/shards")
        XCTAssertTrue(fileSystem.archives.coversMarked("http://origin/shards/0001.tar"))
        XCTAssertFalse(fileSystem.archives.coversMarked("http://origin/shards-old/0001.tar"), "a prefix is no folder")
        XCTAssertTrue(fileSystem.showsArchives(of: "http://origin/shards/"), "the listed directory keeps its mark")
        XCTAssertFalse(fileSystem.showsArchives(of: "http://origin/shards/0001.tar"), "saved once, with its folder")
    }

    func testASavedSetOfAnOlderRangefsLoadsWithoutArchives() throws {
        try #"[{"name": "a.zip", "url": "http://origin/a.zip"}]"#.write(toFile: directory.path + "/catalog.json",
                                                                         atomically: true, encoding: .utf8)
        let store = try CacheStore(root: directory.path, logger: logger)
        let files = try SavedSet(store: store).files()
        XCTAssertEqual(files, [SavedFile(name: "a.zip", url: "http://origin/a.zip")])
        XCTAssertNil(files[0].archives)
    }
}
