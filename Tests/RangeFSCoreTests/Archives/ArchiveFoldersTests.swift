import Foundation
import Logging
@testable import RangeFSArchives
@testable import RangeFSCache
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// The mount side of archives without FUSE (issue 49): the tree an index becomes (inodes, names in order, symlinks
/// that would leave the folder), the index kept in the cache per version, and the state of an index being built.
final class ArchiveFoldersTests: XCTestCase {
    private func member(_ path: String, _ kind: ArchiveMemberKind = .file, link: String? = nil) -> ArchiveMember {
        ArchiveMember(path: path.split(separator: "/").map(String.init), kind: kind, size: kind == .file ? 3 : 0,
                      modificationTime: 1_700_000_000, mode: 0o640, linkTarget: link,
                      data: kind == .file ? .stored(offset: 0, length: 3) : .none)
    }

    private var index: ArchiveIndex {
        ArchiveIndex(format: .tar, members: [
            member("b", .directory), member("b/z.txt"), member("b/a.txt"), member("top.txt"),
            member("b/in", .symlink, link: "../top.txt"), member("b/out", .symlink, link: "../../etc/passwd"),
            member("abs", .symlink, link: "/etc/passwd"), member("b/c", .directory), member("b/c/deep.txt"),
        ])
    }

    func testATreeHasItsFoldersInNameOrderAndInodesThatNameTheirMember() throws {
        let tree = ArchiveTree(index: index, slot: 7)
        let names = { (folder: Int) in tree.children[folder].map { tree.index.members[$0].path.last! } }
        XCTAssertEqual(names(0), ["b", "top.txt"])
        let b = try XCTUnwrap(tree.child(named: "b", in: 0))
        let folderB = try XCTUnwrap(tree.folder(ofMember: b))
        XCTAssertEqual(names(folderB), ["a.txt", "c", "in", "z.txt"])
        let c = try XCTUnwrap(tree.child(named: "c", in: folderB))
        let deep = try XCTUnwrap(tree.child(named: "deep.txt", in: try XCTUnwrap(tree.folder(ofMember: c))))
        XCTAssertEqual(tree.parents[deep], c + 1)
        XCTAssertNil(tree.folder(ofMember: deep), "a file is no folder")
        let inode = tree.inode(of: deep)
        XCTAssertGreaterThanOrEqual(inode, ArchiveTree.memberBit, "never a catalog inode")
        XCTAssertEqual(ArchiveTree.member(of: inode)?.slot, 7)
        XCTAssertEqual(ArchiveTree.member(of: inode)?.position, deep)
        XCTAssertNil(ArchiveTree.member(of: 42), "a catalog inode is no member")
    }

    func testSymlinksLeavingTheFolderAreLeftOut() {
        let tree = ArchiveTree(index: index, slot: 1)
        let links = tree.index.members.filter { $0.kind == .symlink }.map(\.pathString)
        XCTAssertEqual(links, ["b/in"], "'../../etc/passwd' and '/etc/passwd' would lead out of the archive")
    }

    func testAKeptIndexIsUsedForItsVersionOnlyAndNotWhenDamaged() throws {
        let directory = try TemporaryDirectory(prefix: "archive-index")
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let url = "http://origin/tree.zip"
        let v1 = CacheStore.archiveVersion(of: RemoteMetadata(url: url, size: 10, etag: "\"v1\"", lastModified: ""))
        let undated = CacheStore.archiveVersion(of: RemoteMetadata(url: url, size: 10, etag: "",
                                                                   lastModified: "Tue, 01 Jan 2030 00:00:00 GMT"))
        XCTAssertNotEqual(v1, undated)
        try store.saveArchiveIndex(index.encoded(), url: url, version: v1)
        XCTAssertEqual(try ArchiveIndex(decoding: XCTUnwrap(store.savedArchiveIndex(url: url, version: v1))), index)
        XCTAssertNil(store.savedArchiveIndex(url: url, version: undated), "another version is indexed again")
        XCTAssertNil(store.savedArchiveIndex(url: "http://origin/other.zip", version: v1))
        let path = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: directory.path + "/archives").first)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path + "/archives/" + path)))
        bytes[bytes.count / 2] ^= 0x5A
        try Data(bytes).write(to: URL(fileURLWithPath: directory.path + "/archives/" + path))
        XCTAssertNil(store.savedArchiveIndex(url: url, version: v1).flatMap { try? ArchiveIndex(decoding: $0) },
                     "a damaged index fails its CRC")
    }

    func testOneBuildPerVersionAndItsWaitersAnsweredWhenItEnds() {
        let folders = ArchiveFolders()
        let builds = LockedBox<[UInt32]>([])
        let answers = LockedBox(0)
        for _ in 0..<3 {
            folders.whenIndexed(item: 5, version: "etag a", build: { slot in builds.withLock { $0.append(slot) } }) {
                if case .success = $0 { answers.withLock { $0 += 1 } }
            }
        }
        XCTAssertEqual(builds.withLock { $0 }.count, 1, "readers wait for the build under way")
        let slot = builds.withLock { $0[0] }
        XCTAssertEqual(folders.report(item: 5), "indexing")
        folders.finish(slot: slot, version: "etag a", result: .success(ArchiveTree(index: index, slot: slot)),
                       retry: false)
        XCTAssertEqual(answers.withLock { $0 }, 3)
        XCTAssertNotNil(folders.tree(slot: slot))
        XCTAssertTrue(folders.report(item: 5).hasPrefix("indexed: "))
        folders.whenIndexed(item: 5, version: "etag b", build: { slot in builds.withLock { $0.append(slot) } }) { _ in }
        XCTAssertEqual(builds.withLock { $0 }.count, 2, "a changed archive is indexed again")
        XCTAssertNil(folders.tree(slot: slot), "the old version's members are gone")
    }

    func testAFailureThatMayPassIsNotKept() {
        let folders = ArchiveFolders()
        let builds = LockedBox<[UInt32]>([])
        let failed = LockedBox(false)
        let build = { (slot: UInt32) in builds.withLock { $0.append(slot) } }
        folders.whenIndexed(item: 9, version: "v", build: build) { if case .failure = $0 { failed.withLock { $0 = true } } }
        folders.finish(slot: builds.withLock { $0[0] }, version: "v", result: .failure(.io("offline")), retry: true)
        XCTAssertTrue(failed.withLock { $0 })
        folders.whenIndexed(item: 9, version: "v", build: build) { _ in }
        XCTAssertEqual(builds.withLock { $0 }.count, 2, "tried again at the next lookup")
    }
}
