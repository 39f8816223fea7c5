// The cache format: the on-disk contract (DESIGN.md §3). Changing anything here is a format change: bump the
// version and keep reading the old one, or make old entries empty.
//
// Format v2 (issue 46). An entry is named by the first 32 hex digits of SHA-256(identity URL), split into a shard
// folder of 2 and a name of 30 (EntryFiles.swift), and costs one inode when small, two when large:
//
//   small (size <= EntryFiles.smallLimit, 1 MiB)   entries/ab/<30 hex>
//       data at [0, size) exactly as the remote file | zeros to M = size rounded up to 8 | meta block at M
//       | footer: u64 M | magic "RFSENTR2"       (an open reads the last 16 bytes, then [M, end) in one pread)
//   large                                          entries/ab/<30 hex>.data  and  entries/ab/<30 hex>.meta
//       .data: sparse, exactly `size` bytes (passed through to the kernel, written with O_DIRECT); .meta: the
//       meta block at offset 0
//   either, once its end-to-end check ran          entries/ab/<30 hex>.digest   (DigestRecord, below)
//
// The meta block (MetaBlock.swift) is the header record (below, in its version 1 encoding), a CRC32C per block,
// and two slots A and B, each a commit's present bits with a sequence number; the valid slot with the higher
// sequence counts. Block i is bytes [i*blockSize, min(size,(i+1)*blockSize)) of the data. A block's CRC is written
// in the table before its bit is ever committed, and a commit writes the inactive slot only after the data and
// the table are durable. New files are created at their final size (the meta block written, no flush); the first
// commit flushes them. A new version of the file gets new files: the old ones are unlinked, never truncated, so a
// handle still reading the old version reads the old inode.
//
// Why small entries are one file and are never passed through: the kernel bounds a passthrough read by the
// backing file's own size, which here goes on past the data into the meta block; a small file's replies are
// read with pread instead (it is small: passthrough gains little, and so would a mapping). Why the meta block
// trails the data rather than leads it: the data keeps the remote file's offsets, so mapping, pread and direct
// writes of aligned blocks stay 1:1.
//
// Format v1, read only (migrated when its entry is opened: CacheStore+Migration.swift). An entry was one folder
// `entries/<32 hex>/` holding four files (five inodes):
//
//   header   magic "RFSHEAD1" | u32 version=2 | u32 blockSize | u64 size | u64 generation
//            | str url | str etag | str lastModified | u64 answeredAt (> 0) | u32 crc32c of everything before it
//            A header whose `answeredAt` is unknown is written as version 1, the same without that field (as
//            rangefs wrote every header before it kept the moment, and as an older rangefs still reads it).
//            The header of a file whose size is not yet known (its server sends no length) is version 3: the
//            fields of version 2, with `answeredAt` 0 when unknown, then u32 flags (bit 0: size not yet known;
//            `size` is then the entry's capacity, the bytes its geometry covers until the body ends). Only such
//            a header is written as version 3, so every sized header keeps its one encoding and an older rangefs,
//            which refuses version 3, starts such an entry empty rather than serving a capacity as a size.
//   data     sparse file of exactly `size` bytes
//   crc32c   u32 per block at offset 4*i: CRC32C of block i, written before the block's bit is persisted
//   bitmap   magic "RFSBMAP1" | u32 version=1 | u32 blockSize | u64 blockCount | u64 generation
//            | ceil(blockCount/8) bytes of bits | u32 crc32c of everything before it
//   digest   as `.digest` in v2
//
// header and bitmap were only ever replaced whole (temp file, fsync, rename, fsync of the folder).
//
// Before issue 46's one pipeline, a file whose server sends no length was first streamed into two files of a v1
// folder (now an entry of unknown size, version 3 below, holds it; an old folder's are dropped at migration, and
// `verify` still names them):
//
//   stream        the bytes received so far, from byte 0, in order
//   stream-state  magic "RFSSTRM1" | u32 version=1 | u64 length | str url | str etag | str lastModified | u32 crc32c
//
// `length` bytes of `stream` were fdatasynced before the record naming them replaced the last one; bytes past it are
// dropped when the download is loaded again. When the stream reaches its end, `stream` is linked as `data` beside
// a crc32c file and a full bitmap, and the header written last makes it a v1 entry of the size now known, which
// the next open migrates to v2.
//
// The end-to-end check of a complete entry leaves one more record (DigestRecord), replaced whole:
//
//   digest        magic "RFSDGST1" | u32 version=1 | u64 generation | u32 verdict (1 verified, 2 refetching,
//                 3 mismatch) | str expected "sha256=HEX" | str computed | str origin | u32 crc32c
//
// A record of another generation, or a damaged one, is no record: the file counts as unchecked. It stays a file
// of its own: it is written only when a digest is expected (`--checksum`, a Repr-Digest, a sums file), not for
// every file, so most entries never have one.
//
// All integers are little-endian; `str` is a u32 byte length followed by UTF-8. `generation` is a random number
// chosen whenever an entry is (re)created: a slot (or v1 bitmap) whose generation differs from its header's
// belongs to an older version of the remote file and is ignored. A damaged or mismatched record makes the entry
// empty; it never stops the mount.
//
// Every `url` (and the entry's name) is the URL's identity (Fetch/, the URL query's file): no login, no fragment,
// the query's values replaced, so no record holds a secret. Caches made before that held whole URLs in v1
// folders; a mount moves such an entry to its identity (CacheStore.moveEntry).
import RangeFSSystem

/// The fixed part of an entry: what remote object it caches and how it is cut into blocks.
package struct CacheHeader: Equatable, Sendable {
    static let magic = Array("RFSHEAD1".utf8)
    /// The newest version, written when `answeredAt` is known; version 1 (without it) otherwise, and still read.
    static let version: UInt32 = 3
    /// The newest version a header of known size is written in (see `sizeKnown`).
    static let sizedVersion: UInt32 = 2
    /// Flags of a version 3 header: its size is not yet known.
    static let sizeUnknownFlag: UInt32 = 1

    var blockSize: Int
    var size: UInt64
    package var generation: UInt64
    package var url: String
    var etag: String
    var lastModified: String
    /// When the server answered with this version, by its own clock (`RemoteMetadata.answeredAt`): the moment a
    /// listing's date is weighed against (ListedDate.swift), in seconds since 1970; nil when unknown (no Date
    /// header, or a header of version 1). One unknown and one known header differ by their version only, so that
    /// each header has one encoding.
    var answeredAt: Int64?
    /// Whether `size` is the remote file's size. False for a file whose server sends no length, until its body
    /// ended: `size` is then the entry's capacity (the bytes its blocks cover so far), not the file's size.
    package var sizeKnown = true

    /// The capacity an entry of a file whose size is not yet known starts with: its geometry (blocks, CRC table,
    /// slots) is fixed at this many bytes until the body ends or outgrows it.
    static let unsizedCapacity: UInt64 = 16 << 20

    /// The number of blocks that cover `size` bytes.
    var blockCount: Int { Int((size + UInt64(blockSize) - 1) / UInt64(blockSize)) }

    /// The remote identity this header records, for comparing with a fresh probe.
    package var remoteMetadata: RemoteMetadata {
        // A capacity is no size: the file is described by its validators alone, as a probe without a length does.
        var metadata = sizeKnown ? RemoteMetadata(url: url, size: size, etag: etag, lastModified: lastModified)
            : .unsized(url: url, etag: etag, lastModified: lastModified)
        metadata.answeredAt = answeredAt
        return metadata
    }

    package func encoded() -> [UInt8] {
        // A moment before 1970 is no server's Date: written as unknown.
        let moment = answeredAt.flatMap { $0 > 0 ? UInt64($0) : nil }
        let version = !sizeKnown ? Self.version : moment == nil ? 1 : Self.sizedVersion
        var writer = beginRecord(magic: Self.magic, version: version)
        writer.write(UInt32(blockSize))
        writer.write(size)
        writer.write(generation)
        writer.write(string: url)
        writer.write(string: etag)
        writer.write(string: lastModified)
        if version >= 2 { writer.write(moment ?? 0) }
        if version >= 3 { writer.write(Self.sizeUnknownFlag) }
        return sealRecord(writer)
    }

    package static func decode(_ bytes: [UInt8]) throws(FormatError) -> CacheHeader {
        let opened = try openRecord(bytes, magic: magic, versions: 1...version)
        var reader = opened.reader
        let blockSize = Int(try reader.readUInt32())
        guard blockSize >= 512 else { throw .inconsistent("block size \(blockSize)") }
        let size = try reader.readUInt64()
        // Larger than a file can be (an off_t): its block count would overflow (found by the CacheRecords fuzzer).
        guard size <= UInt64(Int64.max) else { throw .inconsistent("size \(size)") }
        let generation = try reader.readUInt64()
        var header = CacheHeader(
            blockSize: blockSize, size: size, generation: generation,
            url: try reader.readString(), etag: try reader.readString(), lastModified: try reader.readString()
        )
        if opened.version >= 2 {
            let answeredAt = try reader.readUInt64()
            // Version 2 is written only with a moment (see `answeredAt`); version 3 writes 0 for none.
            guard answeredAt > 0 || opened.version >= 3, answeredAt <= UInt64(Int64.max) else {
                throw .inconsistent("answered at \(answeredAt)")
            }
            header.answeredAt = answeredAt == 0 ? nil : Int64(answeredAt)
        }
        if opened.version >= 3 {
            // Version 3 is written only for a size not yet known: other flags, or none, are not this version's.
            let flags = try reader.readUInt32()
            guard flags == Self.sizeUnknownFlag else { throw .inconsistent("header flags \(flags)") }
            header.sizeKnown = false
        }
        try closeRecord(reader)
        return header
    }
}

/// The persisted set of blocks whose data (and CRC) is durable in the entry's files.
struct BitmapRecord: Equatable, Sendable {
    static let magic = Array("RFSBMAP1".utf8)
    static let version: UInt32 = 1

    var blockSize: Int
    var generation: UInt64
    var present: BlockBitmap

    func encoded() -> [UInt8] {
        var writer = beginRecord(magic: Self.magic, version: Self.version)
        writer.write(UInt32(blockSize))
        writer.write(UInt64(present.blockCount))
        writer.write(generation)
        writer.write(raw: present.packedBytes)
        return sealRecord(writer)
    }

    static func decode(_ bytes: [UInt8]) throws(FormatError) -> BitmapRecord {
        var reader = try openRecord(bytes, magic: magic, version: version)
        let blockSize = Int(try reader.readUInt32())
        let blockCount = try reader.readUInt64()
        let generation = try reader.readUInt64()
        guard blockCount <= UInt64(Int32.max) else { throw .inconsistent("block count \(blockCount)") }
        let packed = try reader.readBytes((Int(blockCount) + 7) / 8)
        try closeRecord(reader)
        return BitmapRecord(
            blockSize: blockSize, generation: generation,
            present: BlockBitmap(blockCount: Int(blockCount), packedBytes: packed)
        )
    }
}

/// How much of a file without a known size an older rangefs made durable in a v1 folder's `stream` file (read by
/// `verify` only; the folder is dropped at migration).
struct StreamRecord: Equatable, Sendable {
    static let magic = Array("RFSSTRM1".utf8)
    static let version: UInt32 = 1

    var length: UInt64
    var url: String
    var etag: String
    var lastModified: String

    func encoded() -> [UInt8] {
        var writer = beginRecord(magic: Self.magic, version: Self.version)
        writer.write(length)
        writer.write(string: url)
        writer.write(string: etag)
        writer.write(string: lastModified)
        return sealRecord(writer)
    }

    static func decode(_ bytes: [UInt8]) throws(FormatError) -> StreamRecord {
        var reader = try openRecord(bytes, magic: magic, version: version)
        let length = try reader.readUInt64()
        guard length <= UInt64(Int64.max) else { throw .inconsistent("stream length \(length)") }
        let stream = StreamRecord(length: length, url: try reader.readString(),
                                  etag: try reader.readString(), lastModified: try reader.readString())
        try closeRecord(reader)
        return stream
    }
}

/// What the end-to-end check of an entry's complete data found (the `digest` file of its folder).
package struct DigestRecord: Equatable, Sendable {
    static let magic = Array("RFSDGST1".utf8)
    static let version: UInt32 = 1

    package enum Verdict: UInt32, Sendable {
        /// The data's digest is the one expected.
        case verified = 1
        /// The digest differed once; the data was dropped and is being fetched again.
        case refetching = 2
        /// The digest differed again after the refetch: the entry serves nothing.
        case mismatch = 3
    }

    var generation: UInt64
    package var verdict: Verdict
    package var expected: ContentDigest
    package var computed: ContentDigest
    /// Where the expected digest came from: `--checksum`, `Repr-Digest`, or the sums file's URL.
    package var origin: String

    package init(generation: UInt64, verdict: Verdict, expected: ContentDigest, computed: ContentDigest,
                 origin: String) {
        self.generation = generation
        self.verdict = verdict
        self.expected = expected
        self.computed = computed
        self.origin = origin
    }

    func encoded() -> [UInt8] {
        var writer = beginRecord(magic: Self.magic, version: Self.version)
        writer.write(generation)
        writer.write(verdict.rawValue)
        writer.write(string: expected.description)
        writer.write(string: computed.description)
        writer.write(string: origin)
        return sealRecord(writer)
    }

    static func decode(_ bytes: [UInt8]) throws(FormatError) -> DigestRecord {
        var reader = try openRecord(bytes, magic: magic, version: version)
        let generation = try reader.readUInt64()
        let code = try reader.readUInt32()
        guard let verdict = Verdict(rawValue: code) else { throw .inconsistent("digest verdict \(code)") }
        let expectedText = try reader.readString(), computedText = try reader.readString()
        guard let expected = ContentDigest(parsing: expectedText), let computed = ContentDigest(parsing: computedText)
        else { throw .inconsistent("digest \(expectedText) / \(computedText)") }
        let record = DigestRecord(generation: generation, verdict: verdict, expected: expected, computed: computed,
                                  origin: try reader.readString())
        try closeRecord(reader)
        return record
    }
}

// Every record is: 8-byte magic, u32 version, fields, u32 CRC32C of all that precedes it.

func beginRecord(magic: [UInt8], version: UInt32) -> ByteWriter {
    var writer = ByteWriter()
    writer.write(raw: magic)
    writer.write(version)
    return writer
}

func sealRecord(_ writer: ByteWriter) -> [UInt8] {
    var sealed = writer
    sealed.write(CRC32C.checksum(writer.bytes))
    return sealed.bytes
}

/// Checks that the fields read were the whole record: bytes after them (under a checksum that matches) mean the
/// record is not what this version writes, and the entry is empty rather than half understood.
func closeRecord(_ reader: ByteReader) throws(FormatError) {
    guard reader.remaining == 0 else { throw .inconsistent("\(reader.remaining) bytes after the last field") }
}

/// Checks the trailing CRC32C, the magic and the version; returns a reader positioned at the first field.
func openRecord(_ bytes: [UInt8], magic: [UInt8], version: UInt32) throws(FormatError) -> ByteReader {
    try openRecord(bytes, magic: magic, versions: version...version).reader
}

/// `openRecord` for a record of which several versions are read; returns the version found too.
func openRecord(_ bytes: [UInt8], magic: [UInt8],
                        versions: ClosedRange<UInt32>) throws(FormatError) -> (reader: ByteReader, version: UInt32) {
    guard bytes.count >= magic.count + 8 else { throw .truncated }
    var trailer = ByteReader(Array(bytes[(bytes.count - 4)...]))
    guard try trailer.readUInt32() == CRC32C.checksum(bytes[..<(bytes.count - 4)]) else { throw .checksumMismatch }
    var reader = ByteReader(Array(bytes[..<(bytes.count - 4)]))
    guard Array(try reader.readBytes(magic.count)) == magic else { throw .badMagic }
    let found = try reader.readUInt32()
    guard versions.contains(found) else { throw .unsupportedVersion(found) }
    return (reader, found)
}
