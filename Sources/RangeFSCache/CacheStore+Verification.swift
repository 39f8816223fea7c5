// Offline verification of a cache: every present block is read back and checked against its CRC32C. Repair only
// ever removes bits (a block that fails is fetched again on its next read), which is always safe to persist. Both
// layouts are checked: v2 entries, and v1 folders not yet migrated (CacheStore+Migration.swift).

import Glibc
import RangeFSSystem

/// What verifying one entry found.
public struct VerificationReport: Sendable, Equatable {
    var folder: String
    /// The entry's URL, credentials redacted; nil when the header is unreadable.
    var url: String?
    var presentBlocks = 0
    var badBlocks: [Int] = []
    /// Why the entry as a whole is unusable (it will start empty), if it is.
    var damage: String?
    /// The entry was started and never committed (v2: no valid slot; v1: no header yet, or an empty one, and no
    /// bitmap): it claims no block, so it is no damage (issue 36: a new entry's files wait for its first commit).
    var neverCommitted = false
    /// The folder holds an unfinished stream an older rangefs left of a file without a length: this many bytes
    /// (0 when its record is unreadable), dropped at the file's next open (CacheStore+Migration.swift).
    var streamedBytes: UInt64?
    /// The entry is of a file whose size is not yet known (its server sends no length): its blocks cover this
    /// capacity, not a size. Its present blocks have CRCs and are checked like any other.
    var unsizedCapacity: UInt64?
    var repaired = false

    public var isHealthy: Bool { badBlocks.isEmpty && damage == nil }

    /// The report as `rangefs verify --cache` prints it: `OK`, `BAD` or `DAMAGED`, the URL and what was found.
    public var line: String {
        let name = url ?? folder
        if let streamedBytes {
            return "STREAM  \(name): \(streamedBytes) bytes of an unfinished stream of an older rangefs, dropped when the file is next opened (it streams again)"
        }
        if neverCommitted { return "EMPTY   \(name): started, never committed; it holds nothing" }
        if let damage { return "DAMAGED \(name): \(damage); the entry starts empty on its next mount" }
        if badBlocks.isEmpty, let unsizedCapacity {
            return "STREAM  \(name): \(presentBlocks) blocks verified of a file whose size is not yet known (its server sends no length; the entry holds up to \(unsizedCapacity) bytes until the stream ends)"
        }
        if badBlocks.isEmpty { return "OK      \(name): \(presentBlocks) blocks verified" }
        let action = repaired ? "dropped; they will be fetched again" : "run with --repair to drop them"
        return "BAD     \(name): \(badBlocks.count) of \(presentBlocks) blocks fail their CRC (\(action))"
    }
}

extension CacheStore {
    /// The path of every entry in the cache, for `verify(folder:repair:)`: a v1 folder not yet migrated, else the
    /// v2 entry's small file or the stem of its `.data` and `.meta`.
    public func entryFolders() -> [String] {
        EntryFiles.all(root: root).map(entryPath(files:))
    }

    /// The path of `url`'s entry, as `entryFolders` names it.
    public func entryPath(for url: String) -> String { entryPath(files: entryFiles(for: url)) }

    private func entryPath(files: EntryFiles) -> String {
        access(files.legacyFolder, F_OK) == 0 ? files.legacyFolder : files.base
    }

    /// Checks every present block of the entry at `folder` (a path of `entryFolders`) against its CRC; with
    /// `repair`, persists the present set without the blocks that failed.
    public func verify(folder: String, repair: Bool) -> VerificationReport {
        var isFolder = stat()
        guard stat(folder, &isFolder) == 0, isFolder.st_mode & S_IFMT == S_IFDIR else {
            let shard = FileSystemCalls.parentDirectory(of: folder)
            let name = String(shard.suffix(2)) + String(folder.suffix(30))
            return verifyEntry(EntryFiles(root: root, name: name), repair: repair)
        }
        return verifyLegacy(folder: folder, repair: repair)
    }

    /// `verify` of a v2 entry: a repair writes a new slot without the bad blocks, as a commit would.
    private func verifyEntry(_ files: EntryFiles, repair: Bool) -> VerificationReport {
        var report = VerificationReport(folder: files.base)
        let loaded: EntryFiles.Loaded
        switch files.load() {
        case .none:
            report.neverCommitted = true
            return report
        case .damaged(let why):
            report.damage = "damaged entry (\(why))"
            return report
        case .entry(let found):
            loaded = found
        }
        let header = loaded.meta.header
        report.url = Redaction.redact(header.url)
        if !header.sizeKnown { report.unsizedCapacity = header.size }
        guard var slot = loaded.meta.slot else {
            report.neverCommitted = true
            return report
        }
        do {
            let data = try SystemFile(path: loaded.dataPath, flags: O_RDONLY)
            report.badBlocks = try badBlocks(of: data, header: header, present: slot.present,
                                             crcs: loaded.meta.crcs, count: &report.presentBlocks)
            if repair && !report.badBlocks.isEmpty {
                for index in report.badBlocks { slot.present.remove(index) }
                slot.sequence += 1
                let meta = try SystemFile(path: loaded.metaPath, flags: O_RDWR)
                let offset = loaded.metaOffset + UInt64(loaded.meta.layout.slotOffset(Int(slot.sequence % 2)))
                try meta.write(slot.encoded(), at: offset)
                try meta.synchronizeData()
                report.repaired = true
            }
        } catch {
            report.damage = "\(error)"
        }
        return report
    }

    /// The present blocks of `data` whose bytes fail their CRC in `crcs`; counts the present blocks in `count`.
    private func badBlocks(of data: SystemFile, header: CacheHeader, present: BlockBitmap, crcs: [UInt32],
                           count: inout Int) throws(SystemError) -> [Int] {
        var bad: [Int] = []
        for index in 0..<header.blockCount where present.contains(index) {
            count += 1
            let lower = UInt64(index) * UInt64(header.blockSize)
            let length = Int(min(header.size, lower + UInt64(header.blockSize)) - lower)
            let bytes = try data.read(at: lower, count: length)
            // A CRC table shorter than its blocks (v1's file): the missing ones read 0, and those blocks fail.
            let expected = index < crcs.count ? crcs[index] : 0
            if bytes.count != length || CRC32C.checksum(bytes) != expected { bad.append(index) }
        }
        return bad
    }

    /// `verify` of a v1 folder, not yet migrated: a repair replaces its bitmap.
    private func verifyLegacy(folder: String, repair: Bool) -> VerificationReport {
        var report = VerificationReport(folder: folder)
        do {
            // A kill or a power cut between making an entry and its first commit leaves no header, or an empty
            // one, and no bitmap: the entry claims nothing and starts empty. A bitmap is committed only after its
            // header is durable, so a bitmap without a header is damage (of a disk, or of a hand).
            guard let headerBytes = try FileSystemCalls.readSmallFile(folder + "/header"), !headerBytes.isEmpty else {
                // A stream of a file without a length that has not ended keeps its bytes in `stream` and has no
                // header yet: saying it "holds nothing" hid bytes a remount serves (issue 46).
                if let record = try FileSystemCalls.readSmallFile(folder + "/stream-state") {
                    let stream = try? StreamRecord.decode(record)  // unreadable: nothing to name; dropped all the same
                    report.url = stream.map { Redaction.redact($0.url) }
                    report.streamedBytes = stream?.length ?? 0
                } else if access(folder + "/bitmap", F_OK) == 0 {
                    report.damage = "a bitmap without its header"
                } else {
                    report.neverCommitted = true
                }
                return report
            }
            let header: CacheHeader
            do {
                header = try CacheHeader.decode(headerBytes)
            } catch {
                report.damage = "damaged header (\(error))"
                return report
            }
            report.url = Redaction.redact(header.url)
            guard let bitmapBytes = try FileSystemCalls.readSmallFile(folder + "/bitmap") else { return report }
            let record: BitmapRecord
            do {
                record = try BitmapRecord.decode(bitmapBytes)
            } catch {
                report.damage = "damaged bitmap (\(error))"
                return report
            }
            guard record.generation == header.generation, record.present.blockCount == header.blockCount else {
                report.damage = "bitmap of another version"
                return report
            }
            let data = try SystemFile(path: folder + "/data", flags: O_RDONLY)
            let raw = try SystemFile(path: folder + "/crc32c", flags: O_RDONLY).read(at: 0, count: header.blockCount * 4)
            var reader = ByteReader(raw)
            var crcs: [UInt32] = []
            while let crc = try? reader.readUInt32() { crcs.append(crc) }  // the end of the file ends the table
            var present = record.present
            report.badBlocks = try badBlocks(of: data, header: header, present: present, crcs: crcs,
                                             count: &report.presentBlocks)
            for index in report.badBlocks { present.remove(index) }
            if repair && !report.badBlocks.isEmpty {
                let fixed = BitmapRecord(blockSize: record.blockSize, generation: record.generation, present: present)
                try FileSystemCalls.replaceAtomically(folder + "/bitmap", with: fixed.encoded())
                report.repaired = true
            }
        } catch {
            report.damage = "\(error)"
        }
        return report
    }
}
