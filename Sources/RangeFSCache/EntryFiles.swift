// Where one URL's entry lives on disk (CacheFormat.swift): the one place that turns a URL into paths, in the v2
// layout and in v1's folder (read only, to migrate it: EntryMigration.swift), and that reads a v2 meta block.

import Glibc
import RangeFSSystem

/// The files of one URL's cache entry.
package struct EntryFiles: Sendable {
    /// Files of at most this size are small entries: one file, data then meta block then footer. A MiB keeps
    /// a directory of small files at one inode each (documents, pages, thumbnails, source files are far below it)
    /// while every file large enough to be worth passing through to the kernel (a small file is never passed
    /// through: CacheFormat.swift) keeps its own data file.
    static let smallLimit: UInt64 = 1 << 20

    let root: String
    /// The first 32 hex digits of SHA-256(identity URL).
    let name: String

    init(root: String, url: String) {
        self.init(root: root, name: String(SHA256.hexDigest(url).prefix(32)))
    }

    init(root: String, name: String) {
        self.root = root
        self.name = name
        // Made once: an open asks for it several times (its load, its digest record, its checks).
        base = root + "/entries/" + name.prefix(2) + "/" + name.dropFirst(2)
    }

    var shard: String { root + "/entries/" + name.prefix(2) }
    /// A small entry's file; the stem of a large entry's `.data` and `.meta`.
    let base: String
    var dataPath: String { base + ".data" }
    var metaPath: String { base + ".meta" }
    var digestPath: String { base + ".digest" }
    /// The v1 folder of the same URL (CacheFormat.swift, "v1").
    package var legacyFolder: String { root + "/entries/" + name }

    static func isSmall(size: UInt64) -> Bool { size <= smallLimit }

    /// Where a small entry's meta block starts: after its data, aligned to 8 bytes.
    static func metaOffset(size: UInt64) -> UInt64 { (size + 7) & ~7 }

    /// The length of a small entry's file whose meta block has `layout`.
    static func smallFileLength(size: UInt64, layout: MetaLayout) -> UInt64 {
        metaOffset(size: size) + UInt64(layout.length) + UInt64(EntryFooter.length)
    }

    /// What a v2 entry's files hold: its meta block, and whether it is a small entry (one file).
    package struct Loaded {
        var meta: MetaBlock
        var small: Bool
        /// Where the meta block starts in its file (0 in a large entry's `.meta`).
        var metaOffset: UInt64
        var metaPath: String
        var dataPath: String
    }

    package enum Found {
        case none
        case damaged(String)
        case entry(Loaded)
    }

    /// Reads the v2 entry: a small one's file if there is one, else a large one's `.meta`. An empty file is no
    /// entry, not a damaged one: a new entry's file is created, then written in one write, so a kill between the
    /// two (or a power cut before the first commit flushed it) leaves it empty; no commit was made of it.
    package func load() -> Found {
        do {
            if let small = try loadSmall() { return small }
            guard let bytes = try FileSystemCalls.readSmallFile(metaPath, limit: 1 << 30), !bytes.isEmpty else {
                return .none
            }
            let meta = try MetaBlock.decode(bytes)
            // A file whose size is not yet known is a large entry whatever its capacity (CacheStore+EntryFiles).
            guard !meta.header.sizeKnown || !Self.isSmall(size: meta.header.size) else {
                return .damaged("a .meta file for a small file")
            }
            return .entry(Loaded(meta: meta, small: false, metaOffset: 0, metaPath: metaPath, dataPath: dataPath))
        } catch {
            return .damaged("\(error)")
        }
    }

    /// The small entry's file read, or nil when there is none. Its last 4 KiB are read at once: they hold the
    /// footer and, but for a file of many blocks, the whole meta block (an open after a remount read each small
    /// file's tail in two reads, after an `access` to find it).
    private func loadSmall() throws(SystemError) -> Found? {
        let file: SystemFile
        do {
            file = try SystemFile(path: base, flags: O_RDONLY)
        } catch where error.errno == .noEntry {
            return nil
        }
        let length = try file.status().size
        guard length > 0 else { return Found.none }
        guard length >= UInt64(EntryFooter.length) else { return .damaged("a file of \(length) bytes") }
        let footerStart = length - UInt64(EntryFooter.length)
        let tailStart = length - min(length, 4096)
        let tail = try file.read(at: tailStart, count: Int(length - tailStart))
        guard tail.count == Int(length - tailStart) else { return .damaged("a file of \(length) bytes (truncated)") }
        let footer: EntryFooter
        do {
            footer = try EntryFooter.decode(Array(tail.suffix(EntryFooter.length)))
        } catch {
            return .damaged("its footer: \(error)")
        }
        guard footer.metaOffset < footerStart else { return .damaged("meta block at \(footer.metaOffset)") }
        let bytes = footer.metaOffset >= tailStart
            ? Array(tail[Int(footer.metaOffset - tailStart)..<(tail.count - EntryFooter.length)])
            : try file.read(at: footer.metaOffset, count: Int(footerStart - footer.metaOffset))
        let meta: MetaBlock
        do {
            meta = try MetaBlock.decode(bytes)
        } catch {
            return .damaged("its meta block: \(error)")
        }
        guard meta.header.sizeKnown, Self.isSmall(size: meta.header.size), Self.metaOffset(size: meta.header.size) == footer.metaOffset else {
            return .damaged("a meta block at \(footer.metaOffset) for \(meta.header.size) bytes")
        }
        return .entry(Loaded(meta: meta, small: true, metaOffset: footer.metaOffset, metaPath: base, dataPath: base))
    }

    /// Removes every v2 file of the entry (either size); what does not exist is fine.
    package func removeFiles() throws(SystemError) {
        for path in [base, dataPath, metaPath, digestPath] { try FileSystemCalls.removeFile(path) }
    }

    /// Removes every v2 file of the entry and flushes its shard, so that none comes back after a crash: before
    /// the files of another version are made in their place.
    func removeFilesDurably() throws(SystemError) {
        try removeFiles()
        try FileSystemCalls.synchronizeDirectory(containing: base)
    }

    /// The names of every entry in the cache at `root`: v2 entries (by their 32 hex digits) and v1 folders.
    static func all(root: String) -> [EntryFiles] {
        var names = Set<String>()
        for shardName in FileSystemCalls.names(in: root + "/entries") ?? [] {
            if shardName.count == 32, shardName.allSatisfy(\.isHexDigit) {
                names.insert(shardName)
                continue
            }
            guard shardName.count == 2, shardName.allSatisfy(\.isHexDigit) else { continue }
            for file in FileSystemCalls.names(in: root + "/entries/" + shardName) ?? [] {
                let stem = file.hasSuffix(".meta") ? String(file.dropLast(5)) : file
                guard stem.count == 30, stem.allSatisfy(\.isHexDigit) else { continue }
                names.insert(shardName + stem)
            }
        }
        return names.sorted().map { EntryFiles(root: root, name: $0) }
    }
}
