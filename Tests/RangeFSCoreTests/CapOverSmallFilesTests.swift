import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest

/// Issue 46, acceptance 7: many small files read once under `--cache-max-size`, their entries released while idle
/// as the mount does. What the cache holds, counted from the entries' own files (not the ledger's count), never
/// passes the cap by more than one block, and the entries kept open do not follow how fast files are read.
final class CapOverSmallFilesTests: FolderTestCase {
    override class var folderPrefix: String { "cap-small" }

    static let cap = 256 * 1024
    static let blockSize = 1 << 20

    func makeStore(idleEntryTime: Duration = .zero, idleEntryLimit: Int? = nil) throws -> CacheStore {
        var settings = StoreSettings()
        settings.maxBytes = Self.cap
        settings.idleEntryTime = idleEntryTime
        if let idleEntryLimit { settings.idleEntryLimit = idleEntryLimit }
        return try CacheStore(root: directory.path, settings: settings, logger: logger)
    }

    /// File `index`: 4-12 KB, one block, as in bench/scenario_cap.py.
    func metadata(_ index: Int) -> RemoteMetadata {
        RemoteMetadata(url: "http://origin/d/c\(index).bin", size: UInt64(4096 + (index * 2_731) % 8192),
                       etag: "\"\(index)\"", lastModified: "")
    }

    /// Reads file `index` once as a handle does: opened in use, its one block fetched and written, closed.
    func readOnce(_ index: Int, _ store: CacheStore) throws {
        let entry = try store.entryInUse(for: metadata(index), blockSize: Self.blockSize)
        let bytes = pseudoRandomBytes(count: Int(entry.size), seed: UInt64(index))
        let buffer = bytes.withUnsafeBytes { BlockBuffer(copying: $0) }
        entry.put(block: 0, buffer: buffer, background: false, budgeted: true)
        store.waitForWrites()
        entry.use.end()
    }

    /// The bytes the cache holds of files `0..<count`, from each entry's own state: an open entry's block table, else
    /// the present set its files on disk record (a released entry was committed first).
    func bytesHeld(of count: Int, _ store: CacheStore) -> Int {
        (0..<count).reduce(0) { total, index in
            let url = metadata(index).url
            if let open = store.openEntry(for: url) { return total + Int(open.cachedBytes) }
            guard let stored = store.storedEntry(for: url) else { return total }
            let geometry = BlockGeometry(blockSize: stored.header.blockSize, size: stored.header.size)
            return total + Int(geometry.bytes(in: stored.present))
        }
    }

    func testSmallFilesReadOnceWithIdleReleasesStayUnderTheCap() throws {
        let store = try makeStore()
        let files = 400  // about 3.2 MB: twelve times the cap
        var worst = 0
        for index in 0..<files {
            try readOnce(index, store)
            // The group commit (every second in a mount) releases what is idle; here after every few files.
            if index % 7 == 6 { store.commitAll() }
            worst = max(worst, bytesHeld(of: index + 1, store))
        }
        store.commitAll()
        let held = bytesHeld(of: files, store)
        XCTAssertLessThanOrEqual(worst, Self.cap + 12_288,
                                 "the cache held \(worst) bytes under a cap of \(Self.cap) (ledger: \(store.ledger.usedBytes))")
        XCTAssertLessThanOrEqual(held, Self.cap, "at the end")
        XCTAssertEqual(held, store.ledger.usedBytes, "the ledger counts what the files hold")
    }

    func testSmallFilesReadOnceWhileTheCommitReleasesStayUnderTheCap() throws {
        let store = try makeStore(idleEntryTime: .milliseconds(2))
        let files = 1_500
        let done = LockedBox(false)
        let committer = Thread {
            while !done.withLock({ $0 }) { store.commitAll() }
        }
        committer.start()
        var worst = 0
        for index in 0..<files {
            try readOnce(index, store)
            if index % 50 == 49 { worst = max(worst, bytesHeld(of: index + 1, store)) }
        }
        done.withLock { $0 = true }
        Thread.sleep(forTimeInterval: 0.2)
        store.commitAll()
        let held = bytesHeld(of: files, store)
        XCTAssertLessThanOrEqual(max(worst, held), Self.cap + 12_288,
                                 "the cache held \(max(worst, held)) bytes under a cap of \(Self.cap) (ledger: \(store.ledger.usedBytes))")
        XCTAssertEqual(held, store.ledger.usedBytes, "the ledger counts what the files hold")
    }

    /// A cap bounds the disk too: a released entry whose blocks were all evicted leaves no file (each small file
    /// read once kept its own, meta block and all: 585 MiB of disk for a 200 MiB cap at 100,000 files).
    func testEntriesEvictedToNothingLeaveNoFileBehind() throws {
        let store = try makeStore()
        let files = 400
        for index in 0..<files {
            try readOnce(index, store)
            if index % 7 == 6 { store.commitAll() }
        }
        store.commitAll()
        store.commitAll()  // what the last commit evicted is released by the next
        let holding = (0..<files).filter { store.openEntry(for: metadata($0).url) != nil || store.cachedBytes(of: metadata($0)) > 0 }
        var onDisk = 0
        let walker = try XCTUnwrap(FileManager.default.enumerator(atPath: directory.path + "/entries"))
        while let path = walker.nextObject() as? String {
            var info = stat()
            XCTAssertEqual(lstat(directory.path + "/entries/" + path, &info), 0)
            if info.st_mode & S_IFMT == S_IFREG { onDisk += 1 }
        }
        XCTAssertLessThan(holding.count, files / 4, "most were evicted")
        XCTAssertEqual(onDisk, holding.count, "one file per entry that holds something or is open, no more")
        for index in [0, files - 1] {  // evicted, and held: each reads as before
            let entry = try store.entry(for: metadata(index), blockSize: Self.blockSize)
            XCTAssertEqual(entry.cachedBytes, index == 0 ? 0 : metadata(index).size)
        }
    }

    // 100,000 files read once kept every entry of the last 30 s open (idle time), each a mapping and memory: ~20,000
    // at the bench's rate. Beyond `idleEntryLimit` the least recently used go at the next commit, whatever their age.
    func testOpenEntriesStayNearTheLimitHoweverRecentlyTheyWereRead() throws {
        let store = try makeStore(idleEntryTime: .seconds(30), idleEntryLimit: 16)
        var mostOpen = 0
        for index in 0..<200 {
            try readOnce(index, store)
            if index % 10 == 9 { store.commitAll() }  // a commit every 10 files: fast reads
            mostOpen = max(mostOpen, store.entries.withLock { $0.count })
        }
        store.commitAll()
        // Each file read evicts an older one, whose released entry opens again for that: two opened per file.
        XCTAssertLessThanOrEqual(mostOpen, 16 + 2 * 10, "at most the limit, plus what was opened since the last commit")
        XCTAssertLessThanOrEqual(store.entries.withLock { $0.count }, 16)
        XCTAssertNotNil(store.openEntry(for: metadata(199).url), "the most recently read stay open")
        XCTAssertNil(store.openEntry(for: metadata(150).url))
        // Released files whose blocks were evicted are remembered as keys, not as a URL and validators each.
        let holding = (0..<200).filter { store.openEntry(for: metadata($0).url) == nil && store.cachedBytes(of: metadata($0)) > 0 }
        XCTAssertEqual(store.summaries.withLock { $0.known.count }, holding.count)
        XCTAssertEqual(store.cachedBytes(of: metadata(0)), 0, "evicted")
        XCTAssertEqual(store.cachedBytes(of: metadata(199)), metadata(199).size)
    }
}
