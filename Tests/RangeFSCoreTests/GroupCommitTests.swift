import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 36: the group commit makes many new entries durable together (one flush of the file system for all,
/// not flushes per entry per step), and commits a completed file at once. No FUSE, no network: a real store on
/// a real disk.
final class GroupCommitTests: FolderTestCase {
    override class var folderPrefix: String { "group-commit" }

    func metadata(_ index: Int, size: UInt64) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/small/\(index).bin", size: size, etag: "\"e\(index)\"", lastModified: "")
    }

    func storeAll(_ entry: CacheEntry, from bytes: [UInt8]) {
        for index in 0..<entry.blockCount {
            let range = entry.byteRange(of: index..<(index + 1))
            _ = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]).withUnsafeBytes { entry.store(block: index, bytes: $0) }
        }
    }

    // Twelve new entries, committed in one group commit: each is durable, its header too, no temporary file is
    // left, and the next store reads every byte back.
    func testOneGroupCommitMakesManyNewEntriesDurable() throws {
        let sizes = (0..<12).map { UInt64(1_000 + $0 * 9_000) }
        var folders: [String] = []
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            var entries: [CacheEntry] = []
            for (index, size) in sizes.enumerated() {
                let entry = try store.entry(for: metadata(index, size: size), blockSize: 65536)
                XCTAssertFalse(entry.headerDurable.load(ordering: .relaxed), "a new entry's header waits for its commit")
                storeAll(entry, from: pseudoRandomBytes(count: Int(size), seed: UInt64(index)))
                entries.append(entry)
                folders.append(entry.directory)
            }
            store.commitAll()
            for entry in entries {
                XCTAssertTrue(entry.durableBlocks.isFull, entry.directory)
                XCTAssertTrue(entry.headerDurable.load(ordering: .relaxed), entry.directory)
            }
            for folder in folders {
                let shard = FileSystemCalls.parentDirectory(of: folder)
                let left = try FileManager.default.contentsOfDirectory(atPath: shard).filter { $0.contains(".tmp") }
                XCTAssertEqual(left, [], "temporary files left in \(folder)")
            }
        }
        let reopened = try CacheStore(root: directory.path, logger: logger)
        for (index, size) in sizes.enumerated() {
            let entry = try reopened.entry(for: metadata(index, size: size), blockSize: 65536)
            XCTAssertTrue(entry.presentBlocks.isFull, "entry \(index) lost its blocks")
            XCTAssertEqual(try entry.readPresent(0..<size), pseudoRandomBytes(count: Int(size), seed: UInt64(index)))
        }
    }

    // A new entry left by a kill before its first commit (a header, no bitmap) is reopened with its header not
    // known durable, so that its first commit flushes it; one with a committed bitmap is known durable.
    func testAHeaderLeftBeforeItsFirstCommitIsFlushedByTheNextOne() throws {
        let size: UInt64 = 100_000
        do {
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: metadata(0, size: size), blockSize: 65536)
            storeAll(entry, from: pseudoRandomBytes(count: Int(size)))
            // The "kill": the store goes without a commit.
        }
        let store = try CacheStore(root: directory.path, logger: logger)
        let reopened = try store.entry(for: metadata(0, size: size), blockSize: 65536)
        XCTAssertFalse(reopened.headerDurable.load(ordering: .relaxed), "a header never committed was taken as durable")
        storeAll(reopened, from: pseudoRandomBytes(count: Int(size)))
        XCTAssertEqual(try reopened.commit(), true)
        XCTAssertTrue(reopened.headerDurable.load(ordering: .relaxed))
    }

    // `rangefs verify --cache`: an entry without a valid slot (one a kill or a power cut caught before its first
    // commit) is EMPTY and healthy; a committed one whose header record is damaged is damage.
    func testVerifyTellsAnEntryNeverCommittedFromOneWithADamagedHeader() throws {
        let size: UInt64 = 100_000
        let folders: [String] = try (0..<2).map { index in
            let store = try CacheStore(root: directory.path, logger: logger)
            let entry = try store.entry(for: metadata(index, size: size), blockSize: 65536)
            storeAll(entry, from: pseudoRandomBytes(count: Int(size)))
            if index == 1 { try entry.commit() }
            return entry.directory
        }
        // The middle of the header record of the committed entry (its meta block starts after its data).
        let file = try SystemFile(path: folders[1], flags: O_RDWR)
        try file.write([0xFF, 0xFF], at: size + UInt64(MetaLayout.prefixLength) + 20)
        let store = try CacheStore(root: directory.path, logger: logger)
        let never = store.verify(folder: folders[0], repair: false)
        XCTAssertTrue(never.isHealthy, never.line)
        XCTAssertTrue(never.line.hasPrefix("EMPTY"), never.line)
        let lost = store.verify(folder: folders[1], repair: false)
        XCTAssertFalse(lost.isHealthy, lost.line)
        XCTAssertTrue(lost.line.hasPrefix("DAMAGED"), lost.line)
    }

    // A file at least `commitBytes` long is committed as soon as its last block is stored, not at the next tick
    // (here an hour away), so that the next open may hand it to the kernel.
    func testACompletedFileIsCommittedAtOnce() throws {
        var settings = StoreSettings()
        settings.commitInterval = .seconds(3600)
        settings.commitBytes = 256 << 10
        let store = try CacheStore(root: directory.path, settings: settings, logger: logger)
        store.startCommitting()
        let size = 300_000  // five blocks: the bytes commit the first four early, only completion the last
        let bytes = pseudoRandomBytes(count: size)
        let entry = try store.entry(for: metadata(0, size: UInt64(size)), blockSize: 65536)
        func accept(_ index: Int) {
            let range = entry.byteRange(of: index..<(index + 1))
            let buffer = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]).withUnsafeBytes { BlockBuffer(copying: $0) }
            entry.put(block: index, buffer: buffer, background: false, budgeted: true)
        }
        // Deadlines only for a hang: each commit runs as soon as the commit queue gets to it.
        func waitUntil(_ condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(60)
            while !condition() && Date() < deadline { usleep(10_000) }
        }
        // The first four blocks reach `commitBytes`: their commit comes early, by the bytes.
        for index in 0..<4 { accept(index) }
        waitUntil { entry.durableBlocks.setCount == 4 }
        XCTAssertEqual(entry.durableBlocks.setCount, 4)
        // The last block completes the file: only the completion commits it before the tick.
        accept(4)
        waitUntil { entry.isDurablyComplete }
        XCTAssertTrue(entry.isDurablyComplete, "the completed file waits for the next tick: durable \(entry.durableBlocks.setCount) of \(entry.blockCount) blocks")
    }
}
