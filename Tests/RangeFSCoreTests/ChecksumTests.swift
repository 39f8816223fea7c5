import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSControl
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

final class ChecksumTests: XCTestCase {
    func testCRC32CMatchesTheStandardCheckValue() {
        XCTAssertEqual(CRC32C.checksum(Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(CRC32C.checksum([UInt8]()), 0)
    }

    func testCRC32CContinuesAcrossPieces() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let whole = CRC32C.checksum(bytes)
        let first = CRC32C.checksum(bytes[..<333])
        XCTAssertEqual(CRC32C.checksum(bytes[333...], initial: first), whole)
    }

    func testHardwareAndTableVersionsAgree() {
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 4096, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 9, 65536, 65536 + 3, 1 << 20] {
            let bytes = pseudoRandomBytes(count: length, seed: UInt64(length))
            bytes.withUnsafeBytes { raw in
                XCTAssertEqual(CRC32C.checksum(raw, initial: 12345), CRC32C.tableChecksum(raw, initial: 12345), "length \(length)")
            }
        }
    }

    func testSHA256MatchesFIPSVectors() {
        XCTAssertEqual(SHA256.hexDigest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hexDigest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hexDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(SHA256.digest(Array("abc".utf8)).count, 32)
    }

    /// FIPS 180-2's long vector: one million 'a's, many blocks through one call.
    func testSHA256OfOneMillionAsMatchesFIPSVector() {
        XCTAssertEqual(SHA256.hexDigest(String(repeating: "a", count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// The names rangefs gives things on disk derive from SHA-256 of a URL or mount point: a cache kept by an
    /// earlier rangefs is found again only if they never change. Pinned to `sha256sum` of the same text.
    func testOnDiskNamesDerivedFromSHA256AreUnchanged() throws {
        let directory = try TemporaryDirectory(prefix: "names")
        let store = try CacheStore(root: directory.path, logger: Logger(label: "test"))
        let metadata = RemoteMetadata(url: "https://example.com/data/file.bin", size: 1000, etag: "\"v1\"",
                                      lastModified: "")
        let entry = try store.entry(for: metadata, blockSize: 65536)
        // v2: a shard of the first 2 hex digits, the other 30 name the entry; v1 (still read): one folder of 32.
        XCTAssertEqual(entry.directory, directory.path + "/entries/0d/10a88b5dffefecd6f25465a493b53f")
        XCTAssertEqual(store.directory(for: metadata.url), directory.path + "/entries/0d10a88b5dffefecd6f25465a493b53f")
        XCTAssertEqual(access(entry.directory, F_OK), 0, "the entry's file is made under that name")
        XCTAssertEqual(ControlSocket.path(forMountpoint: "/mnt/remote", in: "/run/rangefs"),
                       "/run/rangefs/6af359d970b8e837.sock")
    }
}
