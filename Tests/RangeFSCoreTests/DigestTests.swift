import Foundation
import Glibc
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 29's digests without a mount: the hashes, the places a digest is read from, the record that keeps the
/// verdict, and the mirror choice of a refetch.
final class DigestTests: XCTestCase {
    func testHashesMatchTheStandardVectors() {
        let sha256 = DigestHasher(.sha256)
        sha256.update(Array("ab".utf8))
        sha256.update(Array("c".utf8))
        XCTAssertEqual(sha256.finish().hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let sha512 = DigestHasher(.sha512)
        sha512.update(Array("abc".utf8))
        XCTAssertEqual(sha512.finish().hex, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                       + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
    }

    func testGivenDigestsParseAndBadOnesDoNot() {
        let hex = String(repeating: "ab", count: 32)
        XCTAssertEqual(ContentDigest(parsing: "sha256=" + hex)?.hex, hex)
        XCTAssertEqual(ContentDigest(parsing: "SHA-256:" + hex.uppercased())?.hex, hex)
        XCTAssertEqual(ContentDigest(parsing: "sha256=" + hex)?.description, "sha256=" + hex)
        XCTAssertNil(ContentDigest(parsing: "sha256=" + hex.dropLast(2)), "too short")
        XCTAssertNil(ContentDigest(parsing: "sha256=" + hex.dropLast() + "g"), "not hex")
        XCTAssertNil(ContentDigest(parsing: "md5=" + hex), "an algorithm rangefs does not check")
        XCTAssertNil(ContentDigest(parsing: hex), "no algorithm")
    }

    func testReprDigestAndDigestHeadersAnnounceTheWholeFilesDigest() {
        // sha-256 of "abc", base64.
        let base64 = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        XCTAssertEqual(ProbedMetadata.digest(reprDigest: "sha-256=:\(base64):", digest: nil)?.hex, hex)
        XCTAssertEqual(ProbedMetadata.digest(reprDigest: "unixsum=:AAA=:, sha-256=:\(base64):", digest: nil)?.hex, hex)
        XCTAssertEqual(ProbedMetadata.digest(reprDigest: nil, digest: "SHA-256=\(base64)")?.hex, hex)
        XCTAssertNil(ProbedMetadata.digest(reprDigest: "sha-256=:AAAA:", digest: nil), "a digest of the wrong length")
        XCTAssertNil(ProbedMetadata.digest(reprDigest: nil, digest: "MD5=\(base64)"))
        // Through a probe's head, and never part of the file's identity.
        let head = ResponseHead(status: 206, headers: ["content-range": "bytes 0-0/3", "etag": "\"x\"",
                                                       "repr-digest": "sha-256=:\(base64):"])
        let probed = try? ProbedMetadata.read(url: "http://origin/a", probeResponse: head)
        XCTAssertEqual(probed?.announcedDigest?.hex, hex)
        XCTAssertEqual(probed, RemoteMetadata(url: "http://origin/a", size: 3, etag: "\"x\"", lastModified: ""))
    }

    func testSumsFilesInBothFormatsGiveEachNamesDigest() {
        let one = String(repeating: "1", count: 64), two = String(repeating: "2", count: 128)
        let text = """
        # a comment
        \(one)  debian-12.iso
        \(one) *./binary.img
        SHA512 (bsd.tar) = \(two)
        nonsense line here
        """
        let found = DigestChecks.parseSums(text, fallbackName: "x")
        XCTAssertEqual(found["debian-12.iso"]?.hex, one)
        XCTAssertEqual(found["binary.img"]?.hex, one)
        XCTAssertEqual(found["bsd.tar"]?.algorithm, .sha512)
        XCTAssertEqual(found.count, 3)
        XCTAssertEqual(DigestChecks.parseSums(one + "\n", fallbackName: "alone.bin")["alone.bin"]?.hex, one)
    }

    /// Issue 35: a sums file naming `é.txt` spelled NFC and NFD gives each spelling its own digest.
    func testSumsFilesKeepTheDigestOfEachNameSpellingApart() {
        let composed = String(repeating: "1", count: 64), decomposed = String(repeating: "2", count: 64)
        let found = DigestChecks.parseSums("\(composed)  \u{E9}.txt\n\(decomposed)  e\u{301}.txt\n", fallbackName: "x")
        XCTAssertEqual(found.count, 2)
        XCTAssertEqual(found.keys.map { Array("\($0)".utf8) }.sorted { $0.lexicographicallyPrecedes($1) },
                       [Array("e\u{301}.txt".utf8), Array("\u{E9}.txt".utf8)])
    }

    func testTheRecordRoundTripsAndRefusesDamage() throws {
        let expected = try XCTUnwrap(ContentDigest(parsing: "sha256=" + String(repeating: "0f", count: 32)))
        let computed = try XCTUnwrap(ContentDigest(parsing: "sha256=" + String(repeating: "f0", count: 32)))
        let record = DigestRecord(generation: 42, verdict: .mismatch, expected: expected, computed: computed,
                                  origin: "http://origin/SHA256SUMS")
        XCTAssertEqual(try DigestRecord.decode(record.encoded()), record)
        var damaged = record.encoded()
        damaged[20] ^= 1
        XCTAssertThrowsError(try DigestRecord.decode(damaged))
    }

    func testARefetchAsksEachBlockOfAnotherMirrorThanBefore() {
        let mirrors = MirrorSet(urls: ["http://a/f", "http://b/f", "http://c/f"])
        for block in 0..<4 { mirrors.recordSource(block: block, mirror: 0) }
        for block in 4..<8 { mirrors.recordSource(block: block, mirror: 2) }
        XCTAssertEqual(mirrors.pieces(of: 0..<8), [0..<8], "outside a refetch a run stays whole")
        mirrors.beginRefetch()
        XCTAssertEqual(mirrors.pieces(of: 0..<8), [0..<4, 4..<8])
        XCTAssertEqual(mirrors.pieces(of: 2..<6), [2..<4, 4..<6])
        XCTAssertEqual(mirrors.earlierSources(of: 0..<4), [0])
        for _ in 0..<6 {
            let choice = mirrors.choose(avoiding: [0])
            XCTAssertNotEqual(choice.index, 0)
            mirrors.finished(choice, bytes: 0, seconds: 0, error: nil)
        }
        // Only the avoided mirror left: it is asked rather than nothing.
        mirrors.drop(MirrorSet.Choice(index: 1, url: "http://b/f", validator: nil), reason: "test")
        mirrors.drop(MirrorSet.Choice(index: 2, url: "http://c/f", validator: nil), reason: "test")
        XCTAssertEqual(mirrors.choose(avoiding: [0]).index, 0)
        mirrors.endRefetch()
        XCTAssertEqual(mirrors.pieces(of: 0..<8), [0..<8])
    }
}

/// A digest check through the file system, over an in-memory origin.
final class DigestCheckTests: XCTestCase {
    let url = "http://origin/checked.bin"
    let bytes = pseudoRandomBytes(count: 300_000)

    /// A check waiting behind others keeps its entry open: idle release used to close it under the queued check,
    /// which then hashed a released (stale) entry, gave up, and left the complete file unverified.
    func testAQueuedCheckKeepsItsEntryOpenThroughIdleRelease() throws {
        let directory = try TemporaryDirectory(prefix: "digest-idle")
        let origin = MemoryOrigin()
        origin.serve(url, bytes: bytes, etag: "\"v1\"")
        var storeSettings = StoreSettings()
        storeSettings.idleEntryTime = .zero
        let fileSystem = try makeTestFileSystem(origin: origin, urls: [url], directory: directory.path,
                                                storeSettings: storeSettings)
        let hasher = DigestHasher(.sha256)
        hasher.update(bytes)
        let item = try XCTUnwrap(fileSystem.catalog.item(named: "checked.bin"))
        fileSystem.configure(item.metadata, mirrors: [], checksum: "sha256=" + hasher.finish().hex)

        let handle = try fileSystem.open(item.inode).get().handle
        XCTAssertTrue(try XCTUnwrap(fileSystem.readSynchronously(handle: handle, offset: 0, count: bytes.count)).get()
                      == bytes)
        let entry = try XCTUnwrap(fileSystem.store.openEntry(for: url))
        // Other checks hold the queue: this one waits there once the commit that completes the file queued it.
        fileSystem.digests.queue.suspend()
        let deadline = Date().addingTimeInterval(10)
        while !fileSystem.isCheckingDigest(of: entry) && Date() < deadline {
            fileSystem.store.commitAll()  // the open handle keeps the entry from being released meanwhile
            usleep(1000)
        }
        XCTAssertTrue(entry.isComplete)
        XCTAssertTrue(fileSystem.isCheckingDigest(of: entry), "the completing commit queued the check")
        // Nobody uses the file now; the next commit releases what is idle.
        fileSystem.release(handle)
        fileSystem.store.commitAll()
        XCTAssertTrue(fileSystem.store.openEntry(for: url) === entry, "an entry with its check queued stays open")
        fileSystem.digests.queue.resume()

        let checked = Date().addingTimeInterval(10)
        while fileSystem.isCheckingDigest(of: entry) && Date() < checked { usleep(1000) }
        XCTAssertEqual(entry.digestRecord?.verdict, .verified)
        XCTAssertEqual(fileSystem.store.storedDigest(of: item.metadata)?.verdict, .verified)
    }
}
