// Caches as a rangefs before format v2 left them (CacheFormat.swift, v1): for tests of the lazy migration and of
// older caches. Written with the v1 encoders the store still reads.

import Glibc
@testable import RangeFSCache
@testable import RangeFSSystem

/// Rewrites the v2 entry of `url` in the cache at `root` as the v1 folder an older rangefs kept: `header`, `data`,
/// `crc32c`, `bitmap` (and `digest`), with the same blocks and CRCs. The folder is named, and its header says, for
/// `storedAs` (default `url`). The v2 files are removed. Returns the folder. No store may hold the cache.
@discardableResult
public func convertToLegacyEntry(root: String, url: String, storedAs: String? = nil) throws -> String {
    let files = EntryFiles(root: root, url: url)
    guard case .entry(let loaded) = files.load() else { throw SystemError(call: "load", path: files.base, errno: .noEntry) }
    var header = loaded.meta.header
    header.url = storedAs ?? url
    let folder = root + "/entries/" + SHA256.hexDigest(header.url).prefix(32)
    try FileSystemCalls.makeDirectories(folder)
    if loaded.small {
        let data = try SystemFile(path: loaded.dataPath, flags: O_RDONLY).read(at: 0, count: Int(header.size))
        try FileSystemCalls.replaceAtomically(folder + "/data", with: data)
    } else {
        // Renamed, not copied: the data stays sparse, as v1 kept it.
        guard rename(loaded.dataPath, folder + "/data") == 0 else { throw SystemError(call: "rename", path: folder) }
    }
    var table = ByteWriter()
    for crc in loaded.meta.crcs { table.write(crc) }
    try FileSystemCalls.replaceAtomically(folder + "/crc32c", with: table.bytes)
    let present = loaded.meta.slot?.present ?? BlockBitmap(blockCount: header.blockCount)
    let bitmap = BitmapRecord(blockSize: header.blockSize, generation: header.generation, present: present)
    try FileSystemCalls.replaceAtomically(folder + "/bitmap", with: bitmap.encoded())
    if let digest = try FileSystemCalls.readSmallFile(files.digestPath) {
        try FileSystemCalls.replaceAtomically(folder + "/digest", with: digest)
    }
    try FileSystemCalls.replaceAtomically(folder + "/header", with: header.encoded())
    try files.removeFiles()
    return folder
}
