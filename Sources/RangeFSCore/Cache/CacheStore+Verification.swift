// Offline verification of a cache: every present block is read back and checked against its CRC32C. Repair only
// ever removes bits (a block that fails is fetched again on its next read), which is always safe to persist.

import Glibc

/// What verifying one entry found.
public struct VerificationReport: Sendable, Equatable {
    var folder: String
    /// The entry's URL, credentials redacted; nil when the header is unreadable.
    var url: String?
    var presentBlocks = 0
    var badBlocks: [Int] = []
    /// Why the entry as a whole is unusable (it will start empty), if it is.
    var damage: String?
    /// The folder holds an entry that was started and never committed (no header yet, or an empty one, and no
    /// bitmap): it claims no block, so it is no damage (issue 36: a new entry's header waits for its first commit).
    var neverCommitted = false
    var repaired = false

    public var isHealthy: Bool { badBlocks.isEmpty && damage == nil }

    /// The report as `rangefs verify --cache` prints it: `OK`, `BAD` or `DAMAGED`, the URL and what was found.
    public var line: String {
        let name = url ?? folder
        if neverCommitted { return "EMPTY   \(name): started, never committed; it holds nothing" }
        if let damage { return "DAMAGED \(name): \(damage); the entry starts empty on its next mount" }
        if badBlocks.isEmpty { return "OK      \(name): \(presentBlocks) blocks verified" }
        let action = repaired ? "dropped; they will be fetched again" : "run with --repair to drop them"
        return "BAD     \(name): \(badBlocks.count) of \(presentBlocks) blocks fail their CRC (\(action))"
    }
}

extension CacheStore {
    /// The folders of every entry in the cache.
    public func entryFolders() -> [String] {
        let names = FileSystemCalls.names(in: root + "/entries") ?? []
        return names.filter { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }.map { root + "/entries/" + $0 }.sorted()
    }

    /// Checks every present block of the entry in `folder` against its CRC; with `repair`, persists a bitmap
    /// without the blocks that failed.
    public func verify(folder: String, repair: Bool) -> VerificationReport {
        var report = VerificationReport(folder: folder)
        do {
            // A kill or a power cut between making an entry and its first commit leaves no header, or an empty
            // one, and no bitmap: the entry claims nothing and starts empty. A bitmap is committed only after its
            // header is durable, so a bitmap without a header is damage (of a disk, or of a hand).
            guard let headerBytes = try FileSystemCalls.readSmallFile(folder + "/header"), !headerBytes.isEmpty else {
                if access(folder + "/bitmap", F_OK) == 0 {
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
            let crcs = try SystemFile(path: folder + "/crc32c", flags: O_RDONLY).read(at: 0, count: header.blockCount * 4)
            var present = record.present
            var reader = ByteReader(crcs)
            for index in 0..<header.blockCount {
                // A CRC file shorter than its blocks: the missing slots read 0, and those blocks fail their check.
                let expected = (try? reader.readUInt32()) ?? 0
                guard present.contains(index) else { continue }
                report.presentBlocks += 1
                let lower = UInt64(index) * UInt64(header.blockSize)
                let length = Int(min(header.size, lower + UInt64(header.blockSize)) - lower)
                let bytes = try data.read(at: lower, count: length)
                if bytes.count != length || CRC32C.checksum(bytes) != expected {
                    report.badBlocks.append(index)
                    present.remove(index)
                }
            }
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
