import Foundation
import Glibc
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest
@testable import RangeFSObjectStore

/// Issue 45, case 3: the kernel reads no byte past the size it holds, and a lookup gave it the listing's. When the
/// open's probe finds another size (a stale listing), the kernel is told to drop the listed size before the open
/// is answered, so the first read after the open is never cut short. No FUSE: a `RangeFS` over a `MemoryOrigin`,
/// with a kernel whose notices arrive late, as on a busy machine.
final class ListedSizeTests: XCTestCase {
    let origin = MemoryOrigin()
    var directory: TemporaryDirectory!
    let bytes = pseudoRandomBytes(count: 100_000, seed: 45)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "listed-size")
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    func testAnOpenWhoseProbeFindsAnotherSizeMakesTheKernelDropTheListedSizeBeforeItIsAnswered() throws {
        let credentials = CredentialTable()
        credentials.setObjectStore(endpoint: "http://h:9000", region: "us-east-1", pathStyle: true, key: nil,
                                   anonymous: true)
        // The listing states 99,000 bytes; the object has 100,000 (it grew since the listing was made).
        let page = #"""
        <ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>
        <Contents><Key>d%2Fgrown.bin</Key><LastModified>2026-11-26T04:08:04Z</LastModified><ETag>&quot;e1&quot;</ETag>
        <Size>99000</Size></Contents></ListBucketResult>
        """#
        origin.serve(ObjectStoreURL.listURL(bucketURL: "http://h:9000/bkt", prefix: "d/", continuation: nil),
                     bytes: Array(page.utf8))
        origin.serve("http://h:9000/bkt/d/grown.bin", bytes: bytes, etag: "\"e2\"")
        let kernel = KernelRecorder(delay: 0.5)
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [], directory: directory.path,
                                                root: credentials.adopt("s3://bkt/d/").url, credentials: credentials,
                                                kernel: kernel)
        defer { fileSystem.store.close() }
        let listed = try fileSystem.lookup(parent: Catalog.rootInode, name: "grown.bin").get()
        XCTAssertEqual(listed.size, 99_000, "the kernel is given the listing's size")

        let done = DispatchSemaphore(value: 0)
        let answer = LockedBox<(Result<OpenedFile, FileSystemError>, [KernelRecorder.Notice])?>(nil)
        fileSystem.open(listed.inode) { result in
            answer.withLock { $0 = (result, kernel.notices) }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "the open is answered")
        let (result, noticesAtReply) = try XCTUnwrap(answer.withLock { $0 })
        let handle = try result.get().handle
        XCTAssertTrue(noticesAtReply.contains(.attributes(listed.inode)),
                      "the kernel dropped the listed size before the open was answered: \(noticesAtReply)")
        XCTAssertEqual(try fileSystem.attributes(of: listed.inode).get().size, 100_000, "and asks for the real one")
        XCTAssertEqual(try fileSystem.readSynchronously(handle: handle, offset: 99_000, count: 4096)?.get(),
                       Array(bytes[99_000...]), "a read past the listed size is served")
        fileSystem.release(handle)
    }
}
