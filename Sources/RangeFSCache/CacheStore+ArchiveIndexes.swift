// Archive indexes kept in the cache, so that a remount lists an archive's folder at once and offline. One file per
// archive URL in `archives/` (named by the URL's hash, as `listings/` are), replaced atomically (temporary file,
// fsync, rename, folder fsync) like every cache record:
//
//   magic "RFSARCH1" | URL (u32 length + UTF-8) | version (u32 length + UTF-8) | the index's saved form, which
//   carries its own CRC32C (ArchiveIndex+Coding.swift)
//
// The cache keeps the saved form as bytes; FileSystem encodes and decodes it (RangeFS+Archives.swift), so the
// cache knows no archive type.
//
// The version is the archive's ETag, or its length and date without one: an index kept for another version (the
// archive changed) or one that fails any check is not used, and the archive is indexed again.
import RangeFSSystem

extension CacheStore {
    private static let archiveIndexMagic = Array("RFSARCH1".utf8)

    private func archiveIndexPath(for url: String) -> String {
        root + "/archives/" + String(SHA256.hexDigest(url).prefix(32))
    }

    /// The version an archive's index is kept for: its ETag, else its length and date.
    package static func archiveVersion(of metadata: RemoteMetadata) -> String {
        metadata.etag.isEmpty ? "size \(metadata.size) date \(metadata.lastModified)" : "etag \(metadata.etag)"
    }

    /// Keeps `index` (an index's saved form), made from version `version` of the archive at `url`.
    package func saveArchiveIndex(_ index: [UInt8], url: String, version: String) throws(SystemError) {
        var writer = ByteWriter()
        writer.write(raw: Self.archiveIndexMagic)
        writer.write(string: url)
        writer.write(string: version)
        writer.write(raw: index)
        try FileSystemCalls.makeDirectories(root + "/archives")
        try FileSystemCalls.replaceAtomically(archiveIndexPath(for: url), with: writer.bytes)
    }

    /// Deletes the index kept for the archive at `url`, if any: with its entry (`rangefs rm`, `evict`), so that a
    /// removed archive leaves nothing in the cache. A mount that holds the index in memory keeps using it; the next
    /// mount indexes the archive again.
    package func removeArchiveIndex(for url: String) throws(SystemError) {
        try FileSystemCalls.removeFile(archiveIndexPath(for: url))
    }

    /// The saved form of the index kept for version `version` of the archive at `url`, if one is kept for it (the
    /// saved form's own CRC32C is checked when it is decoded).
    package func savedArchiveIndex(url: String, version: String) -> [UInt8]? {
        // An unreadable or damaged kept index is as if none was kept: the archive is indexed again.
        guard let bytes = (try? FileSystemCalls.readSmallFile(archiveIndexPath(for: url), limit: 1 << 30)) ?? nil,
              bytes.starts(with: Self.archiveIndexMagic) else { return nil }
        var reader = ByteReader(bytes)
        do {
            _ = try reader.readBytes(Self.archiveIndexMagic.count)
            guard try reader.readString(limit: 1 << 16) == url, try reader.readString(limit: 1 << 16) == version else {
                return nil
            }
            return Array(try reader.readBytes(reader.remaining))
        } catch {
            return nil
        }
    }
}
