import Dispatch
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46: a first `ls -l` of a million names can outlive the directory cache time (60 s), and each further
/// READDIRPLUS of it asked whether the directory was listed, found the listing old and listed the million again
/// under the reader (a 1.6 GB peak while both were held). A read past the start of a directory already read through
/// a handle answers from that handle's snapshot and asks for nothing; a new read from the start refreshes it as
/// before. The listing requests are counted at the origin.
final class DirectoryReadRefreshTests: XCTestCase {
    private let base = "http://h/d/"

    func testAReadFurtherIntoAnOpenDirectoryListsNothingAgain() throws {
        let origin = MemoryOrigin()
        let directory = try TemporaryDirectory(prefix: "read-refresh")
        let names = (0..<6).map { "f\($0).bin" }
        let json = "[" + names.map {
            #"{"name":"\#($0)","type":"file","mtime":"Mon, 23 Nov 2026 10:00:00 GMT","size":1}"#
        }.joined(separator: ",") + "]"
        origin.serve(base, bytes: Array(json.utf8))
        // Every listing is old at once: each question about the directory's listing would refresh it.
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [], directory: directory.path, root: base) {
            $0.directoryCacheTime = .seconds(0)
        }
        defer { fileSystem.store.close() }
        let listings = { origin.requests.filter { $0.url == self.base }.count }
        /// Waits until no listing of the root runs (a refresh starts before the read that began it is answered).
        func settled() {
            while fileSystem.directories.state.withLock({ $0.listings[Catalog.rootInode]?.running == true }) {
                usleep(10_000)
            }
        }
        func read(_ handle: UInt64, from start: Int) throws -> [String] {
            let done = DispatchSemaphore(value: 0)
            let answer = LockedBox<Result<[RangeFS.DirectoryEntry], FileSystemError>?>(nil)
            fileSystem.readDirectory(Catalog.rootInode, handle: handle, from: start, count: 2, attributes: true) {
                result in
                answer.withLock { $0 = result }
                done.signal()
            }
            done.wait()
            return try XCTUnwrap(answer.withLock { $0 }).get().map(\.name)
        }

        let handle = try fileSystem.openDirectory(Catalog.rootInode).get()
        XCTAssertEqual(try read(handle, from: 0), ["f0.bin", "f1.bin"])
        settled()
        let first = listings()
        XCTAssertGreaterThanOrEqual(first, 1)
        XCTAssertEqual(try read(handle, from: 2), ["f2.bin", "f3.bin"])
        XCTAssertEqual(try read(handle, from: 4), ["f4.bin", "f5.bin"])
        XCTAssertEqual(try read(handle, from: 6), [])
        settled()
        XCTAssertEqual(listings(), first, "the reads further into the open directory asked for no listing")
        fileSystem.releaseDirectory(handle)

        // A new read from the start is a new look at the directory: its old listing is refreshed.
        let again = try fileSystem.openDirectory(Catalog.rootInode).get()
        defer { fileSystem.releaseDirectory(again) }
        XCTAssertEqual(try read(again, from: 0), ["f0.bin", "f1.bin"])
        settled()
        XCTAssertEqual(listings(), first + 1, "the new read from the start refreshed the listing")
    }
}
