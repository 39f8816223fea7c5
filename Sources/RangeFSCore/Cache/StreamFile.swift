// The cache's side of a file whose server sends no length (the download itself is in Fetch/): the
// entry folder's `stream` file, which grows from byte 0, and `stream-state`, which records how many of its bytes
// are durable (formats in CacheFormat.swift). Once the stream ends, `install` makes it an ordinary complete entry.

import Dispatch
import Glibc
import Synchronization

/// The `stream` file of one stream-only file, and its record of durable bytes.
final class StreamFile: Sendable {
    let url: String
    let folder: String
    let file: PooledFile
    let store: CacheStore
    /// The durable bytes an earlier stream of this version left, found when the file was opened.
    let keptBytes: UInt64

    /// Opens the stream file of `metadata`'s URL, keeping what an earlier stream of the same version made durable
    /// (and dropping anything past it, or everything if it is another version).
    init(for metadata: RemoteMetadata, in store: CacheStore) throws(SystemError) {
        url = metadata.url
        folder = store.directory(for: metadata.url)
        self.store = store
        store.mayHoldLegacyFolders.store(true, ordering: .relaxed)  // before the folder is: no lookup misses it
        try FileSystemCalls.makeDirectories(folder)
        var kept: UInt64 = 0
        if let bytes = try FileSystemCalls.readSmallFile(folder + "/stream-state") {
            do {
                let record = try StreamRecord.decode(bytes)
                if record.url == metadata.url,
                   RemoteMetadata.unsized(url: url, etag: record.etag, lastModified: record.lastModified)
                    .describesSameContent(as: metadata) {
                    kept = record.length
                }
            } catch {
                store.logger.notice("\(folder)/stream-state is damaged (\(error)); the stream starts again at byte 0")
            }
        }
        file = store.descriptors.file(path: folder + "/stream", flags: O_RDWR | O_CREAT)
        if try file.status().size < kept { kept = 0 }  // a record that outlived its data: start over
        try file.truncate(to: kept)  // bytes past the durable length may be anything
        if kept == 0 { try FileSystemCalls.removeFile(folder + "/stream-state") }
        keptBytes = kept
    }

    var path: String { file.path }

    /// How many received bytes, or how long, between two commits: the store's group-commit bounds.
    var commitBytes: UInt64 { UInt64(store.settings.commitBytes) }
    var commitInterval: Duration { store.settings.commitInterval }
    /// Where commits run, and where readers are answered.
    var commitQueue: DispatchQueue { store.commitQueue }
    var replyQueue: DispatchQueue { store.pipeline.replyQueue }

    func read(at offset: UInt64, count: Int) throws(SystemError) -> [UInt8] {
        try file.read(at: offset, count: count)
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemError) {
        try file.write(bytes, at: offset)
    }

    func truncate(to length: UInt64) throws(SystemError) { try file.truncate(to: length) }

    /// Makes the first `length` bytes durable, then records that they are, with the version they belong to.
    func makeDurable(length: UInt64, etag: String, lastModified: String) throws(SystemError) {
        try file.synchronizeData()
        let record = StreamRecord(length: length, url: url, etag: etag, lastModified: lastModified)
        try FileSystemCalls.replaceAtomically(folder + "/stream-state", with: record.encoded())
    }

    /// A reply of `count` received bytes at `offset`, straight from the file.
    func reply(offset: UInt64, count: Int) throws(SystemError) -> ReadReply {
        .file(try file.lease(), offset: offset, count: count)
    }

    /// The stream is complete at `metadata.size` bytes: it becomes an ordinary v2 entry, every block present.
    func install(as metadata: RemoteMetadata, blockSize: Int) throws(SystemError) {
        try store.installStream(file, of: metadata, blockSize: blockSize)
    }
}

extension CacheStore {
    /// Makes the complete stream `file` (in the entry folder of `metadata.url`) an ordinary entry of
    /// `metadata.size` bytes, every block present. The header is written last: a crash before it leaves the
    /// stream and its record as they were, to be completed again.
    func installStream(_ file: PooledFile, of metadata: RemoteMetadata, blockSize: Int) throws(SystemError) {
        let folder = directory(for: metadata.url)
        var header = CacheHeader(blockSize: blockSize, size: metadata.size, generation: UInt64.random(in: 1...UInt64.max),
                                 url: metadata.url, etag: metadata.etag, lastModified: metadata.lastModified)
        header.answeredAt = metadata.answeredAt
        for name in ["header", "bitmap"] { try FileSystemCalls.removeFile(folder + "/" + name) }
        try FileSystemCalls.synchronizeDirectory(containing: folder + "/header")
        var crcs = ByteWriter()
        for index in 0..<header.blockCount {
            let start = UInt64(index) * UInt64(blockSize)
            let length = Int(min(UInt64(blockSize), metadata.size - start))
            let block = try file.read(at: start, count: length)
            guard block.count == length else { throw SystemError(call: "read", path: file.path, errno: .io) }
            crcs.write(CRC32C.checksum(block))
        }
        try FileSystemCalls.replaceAtomically(folder + "/crc32c", with: crcs.bytes)
        try FileSystemCalls.removeFile(folder + "/data")
        try retryingEINTR("link", folder + "/data") { link(file.path, folder + "/data") }
        var present = BlockBitmap(blockCount: header.blockCount)
        for index in 0..<header.blockCount { _ = present.insert(index) }
        try FileSystemCalls.replaceAtomically(
            folder + "/bitmap",
            with: BitmapRecord(blockSize: blockSize, generation: header.generation, present: present).encoded())
        try FileSystemCalls.replaceAtomically(folder + "/header", with: header.encoded())
        forgetSummary(of: metadata.url)
        for name in ["stream", "stream-state"] { try FileSystemCalls.removeFile(folder + "/" + name) }
        try FileSystemCalls.synchronizeDirectory(containing: folder + "/stream")
        // Into the v2 layout at once (the data is renamed, or copied for a small file), rather than at the next
        // open: `verify`, `rm` and a later mount find what every other complete entry looks like.
        try migrateLegacyEntry(entryFiles(for: metadata.url))
    }
}
