import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// `FileSystemCalls.replaceAtomically`, the one way rangefs replaces a file (catalog, credentials, listings,
/// headers, bitmaps, the unmount report): whole contents or the old ones, never a mix, never a temporary file left.
final class FileSystemCallsTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "replace")
    }

    override func tearDown() {
        directory = nil  // XCTest keeps test cases alive; release the folder now
        super.tearDown()
    }

    /// The temporary files in `folder`: what a replace must never leave behind.
    func temporaryFiles(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".tmp") }.sorted()
    }

    /// Contents of writer `writer`'s save `save`: its own length and its own bytes throughout, so that any mix of
    /// two (one written into the other's temporary file, or a shorter one over a longer) matches none of them.
    func contents(writer: Int, save: Int) -> [UInt8] {
        let length = 150_000 + (writer * 16 + save) * 4_099
        let first = UInt8(truncatingIfNeeded: writer * 16 + save + 1)
        return (0..<length).map { first &+ UInt8(truncatingIfNeeded: $0 / 4096) }
    }

    /// Several threads replace one file at once with large, distinct contents, each reading it back after each
    /// save: every save succeeds, and every read, and the end, is one save's contents whole.
    func testConcurrentReplacesOfOneFileAlwaysLeaveOneWholeContent() throws {
        let path = directory.path + "/catalog.json"
        let writers = 4, saves = 8
        let every = Set((0..<writers).flatMap { writer in (0..<saves).map { contents(writer: writer, save: $0) } })
        XCTAssertEqual(every.count, writers * saves)
        let failures = LockedBox<[String]>([])
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            for save in 0..<saves {
                do {
                    try FileSystemCalls.replaceAtomically(path, with: contents(writer: writer, save: save))
                    let read = try XCTUnwrap(FileSystemCalls.readSmallFile(path))
                    if !every.contains(read) {
                        failures.withLock { $0.append("read back \(read.count) bytes that no writer wrote whole") }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }.prefix(5), [])
        XCTAssertTrue(every.contains(try XCTUnwrap(FileSystemCalls.readSmallFile(path))))
        XCTAssertEqual(try temporaryFiles(in: directory.path), [], "no temporary file is left behind")
    }

    /// A daemon killed between writing a temporary file and renaming it leaves that file; a later daemon may get
    /// the same pid (in a container, it usually does). Leftovers under every name a pid-and-counter scheme would
    /// give this process must neither make a replace fail (EEXIST) nor be written into.
    func testLeftoverTemporaryFilesOfAKilledProcessNeitherBlockNorAreWrittenInto() throws {
        let path = directory.path + "/header"
        let leftovers = (0...4096).map { "\(path).tmp.\(getpid()).\($0)" }
        for leftover in leftovers { try FileSystemCalls.createFile(leftover, with: []) }
        for save in 0..<20 {
            try FileSystemCalls.replaceAtomically(path, with: Array("version \(save)".utf8))
        }
        XCTAssertEqual(try FileSystemCalls.readSmallFile(path), Array("version 19".utf8))
        for leftover in leftovers {
            var info = stat()
            XCTAssertEqual(stat(leftover, &info), 0)
            XCTAssertEqual(info.st_size, 0, "\(leftover) was written into")
        }
        XCTAssertEqual(try temporaryFiles(in: directory.path).count, leftovers.count, "only the leftovers remain")
    }

    /// The new file has the mode asked for (0600 by default, which credentials.json relies on), whatever mode
    /// the file it replaces had.
    func testReplacedFileHasTheModeAskedFor() throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        let path = directory.path + "/file"
        XCTAssertEqual(Glibc.close(open(path, O_WRONLY | O_CREAT, 0o666)), 0)
        XCTAssertEqual(chmod(path, 0o666), 0)
        func mode() -> mode_t {
            var info = stat()
            XCTAssertEqual(stat(path, &info), 0)
            return info.st_mode & 0o777
        }
        try FileSystemCalls.replaceAtomically(path, with: [1, 2, 3])
        XCTAssertEqual(mode(), 0o600)
        try FileSystemCalls.replaceAtomically(path, with: [4, 5, 6], mode: 0o640)
        XCTAssertEqual(mode(), 0o640)
        XCTAssertEqual(try FileSystemCalls.readSmallFile(path), [4, 5, 6])
    }

    /// A replace that cannot be written (a full disk: a 256 KiB tmpfs, so root only) fails with ENOSPC, keeps the
    /// old file whole and leaves no temporary file; for credentials.json through the cache, the old credentials
    /// stay readable and the file stays 0600.
    func testFullDiskKeepsTheOldFileAndLeavesNoTemporaryFile() throws {
        try XCTSkipUnless(getuid() == 0, "mounting a small tmpfs needs root")
        let small = directory.path + "/small"
        XCTAssertEqual(mkdir(small, 0o700), 0)
        let mounted = try Shell.run("/bin/mount", ["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", small])
        try XCTSkipUnless(mounted.status == 0, "cannot mount a tmpfs here: \(mounted.stderr)")
        defer { XCTAssertEqual((try? Shell.run("/bin/umount", [small]))?.status, 0, "the tmpfs is unmounted") }

        let path = small + "/listing"
        try FileSystemCalls.replaceAtomically(path, with: Array("old".utf8))
        XCTAssertThrowsError(try FileSystemCalls.replaceAtomically(path, with: [UInt8](repeating: 7, count: 1 << 20))) {
            XCTAssertTrue(($0 as? SystemError)?.isNoSpace ?? false, "\($0)")
        }
        XCTAssertEqual(try FileSystemCalls.readSmallFile(path), Array("old".utf8))
        XCTAssertEqual(try temporaryFiles(in: small), [])

        // In a scope of its own: the store holds its lock file open, which would keep the tmpfs busy.
        do {
            let store = try CacheStore(root: small + "/cache", logger: Logger(label: "test"))
            let saved = ["http://origin:80": OriginCredentials(queries: ["http://origin/f?token=***": "token=short"])]
            try SavedCredentials(cacheRoot: store.root).save(saved)
            let huge = "token=" + String(repeating: "x", count: 1 << 20)
            XCTAssertThrowsError(try SavedCredentials(cacheRoot: store.root).save(
                ["http://origin:80": OriginCredentials(queries: ["http://origin/f?token=***": huge])]))
            XCTAssertEqual(try SavedCredentials(cacheRoot: store.root).load(), saved)
            var info = stat()
            XCTAssertEqual(stat(small + "/cache/credentials.json", &info), 0)
            XCTAssertEqual(info.st_mode & 0o777, 0o600)
        }
        XCTAssertEqual(try temporaryFiles(in: small + "/cache"), [])
    }
}
