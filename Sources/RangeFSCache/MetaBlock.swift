// Cache format v2: the records of an entry's meta block (the layout of files is in CacheFormat.swift).
//
//   meta block  magic "RFSMETA2" | u32 version=1 | u32 headerLength | header record (CacheHeader, its version 1
//               encoding: without answeredAt, which lives in the slots; version 3, answeredAt 0, for a file whose
//               size is not yet known) | CRC table (u32 per block)
//               | slot A | slot B
//   slot        magic "RFSSLOT2" | u32 version=1 | u64 sequence | u64 generation | u64 answeredAt (0 unknown)
//               | u32 flags (bit 0: the ETag is retired) | ceil(blockCount/8) bytes of bits | u32 crc32c
//   footer      u64 offset of the meta block | magic "RFSENTR2"   (the last 16 bytes of a small entry's file)
//
// Why two slots rather than v1's bitmap file replaced by rename: a commit writes the slot that is NOT the newest
// valid one, with the next sequence number, in place, then flushes. A torn write leaves a slot whose CRC fails, and
// the reader takes the other one, which still tells the truth about data already durable. No temporary file, no
// rename, no folder flush per commit, and no inode made per commit. The slots are of fixed length for the entry's
// block count, so their offsets follow from the header record's length alone.
//
// The header record never changes once written: what changes over an entry's life (the present bits, when the
// server last answered, a retired ETag) is in the slots. The generation in a slot ties it to its header: a slot
// of another generation is no slot.
import RangeFSSystem

/// One commit of an entry: which blocks were durable, and what the entry had learnt of its server by then.
struct MetaSlot: Equatable, Sendable {
    static let magic = Array("RFSSLOT2".utf8)
    static let version: UInt32 = 1

    var sequence: UInt64
    var generation: UInt64
    /// When the server last answered with this version (ListedDate.swift), in seconds since 1970; nil if unknown.
    var answeredAt: Int64?
    /// The server rotates its ETags: the header's ETag is not this version's validator (RotatingETags.swift).
    var etagRetired: Bool
    var present: BlockBitmap

    /// The encoded length of a slot for `blockCount` blocks: every slot of an entry has it.
    static func length(blockCount: Int) -> Int { 8 + 4 + 8 + 8 + 8 + 4 + (blockCount + 7) / 8 + 4 }

    func encoded() -> [UInt8] {
        var writer = beginRecord(magic: Self.magic, version: Self.version)
        writer.write(sequence)
        writer.write(generation)
        writer.write(answeredAt.flatMap { $0 > 0 ? UInt64($0) : nil } ?? 0)
        writer.write(UInt32(etagRetired ? 1 : 0))
        writer.write(raw: present.packedBytes)
        return sealRecord(writer)
    }

    /// Decodes a slot of an entry of `blockCount` blocks; `bytes` must be exactly its length.
    static func decode(_ bytes: [UInt8], blockCount: Int) throws(FormatError) -> MetaSlot {
        guard bytes.count == length(blockCount: blockCount) else { throw .truncated }
        var reader = try openRecord(bytes, magic: magic, version: version)
        let sequence = try reader.readUInt64()
        let generation = try reader.readUInt64()
        let answeredAt = try reader.readUInt64()
        guard answeredAt <= UInt64(Int64.max) else { throw .inconsistent("answered at \(answeredAt)") }
        let flags = try reader.readUInt32()
        guard flags <= 1 else { throw .inconsistent("slot flags \(flags)") }
        let packed = try reader.readBytes((blockCount + 7) / 8)
        try closeRecord(reader)
        let present = BlockBitmap(blockCount: blockCount, packedBytes: packed)
        // Bits past the last block are written by no rangefs (found by the MetaBlock fuzzer: they were dropped,
        // and the slot read as another one).
        guard present.packedBytes.elementsEqual(packed) else { throw .inconsistent("bits past block \(blockCount)") }
        return MetaSlot(sequence: sequence, generation: generation, answeredAt: answeredAt == 0 ? nil : Int64(answeredAt),
                        etagRetired: flags == 1, present: present)
    }
}

/// Where the parts of a meta block lie, relative to its start, for a header record of a given length.
struct MetaLayout: Equatable, Sendable {
    static let magic = Array("RFSMETA2".utf8)
    static let version: UInt32 = 1
    /// Magic, version and the header record's length.
    static let prefixLength = 16

    let headerLength: Int
    let blockCount: Int

    var crcTableOffset: Int { Self.prefixLength + headerLength }
    var slotLength: Int { MetaSlot.length(blockCount: blockCount) }
    /// Slot 0 (A) or 1 (B). The slot of sequence n is n % 2, so a commit never overwrites the newest slot.
    func slotOffset(_ slot: Int) -> Int { crcTableOffset + 4 * blockCount + slot * slotLength }
    var length: Int { slotOffset(2) }
}

/// An entry's meta block: its immutable header, its CRC table, and its newest valid slot.
struct MetaBlock: Equatable, Sendable {
    /// The header, with `answeredAt` and a retired ETag applied from the slot (as v1 kept them in the header).
    var header: CacheHeader
    var layout: MetaLayout
    var crcs: [UInt32]
    /// The newest valid slot; nil when neither is (a new entry, or both damaged): the entry holds nothing.
    var slot: MetaSlot?

    /// The bytes of a new entry's meta block: its header, a zero CRC table and two empty (invalid) slots.
    static func initial(for header: CacheHeader) -> (bytes: [UInt8], layout: MetaLayout) {
        var fixed = header
        fixed.answeredAt = nil
        let record = fixed.encoded()
        let layout = MetaLayout(headerLength: record.count, blockCount: header.blockCount)
        var writer = ByteWriter()
        writer.write(raw: MetaLayout.magic)
        writer.write(MetaLayout.version)
        writer.write(UInt32(record.count))
        writer.write(raw: record)
        var bytes = writer.bytes
        bytes += [UInt8](repeating: 0, count: layout.length - bytes.count)
        return (bytes, layout)
    }

    /// Decodes a whole meta block (exactly its bytes). A damaged header throws; damaged slots are skipped.
    static func decode(_ bytes: [UInt8]) throws(FormatError) -> MetaBlock {
        var reader = ByteReader(bytes)
        guard Array(try reader.readBytes(MetaLayout.magic.count)) == MetaLayout.magic else { throw .badMagic }
        let version = try reader.readUInt32()
        guard version == MetaLayout.version else { throw .unsupportedVersion(version) }
        let headerLength = Int(try reader.readUInt32())
        guard headerLength <= bytes.count - MetaLayout.prefixLength else { throw .truncated }
        var header = try CacheHeader.decode(Array(try reader.readBytes(headerLength)))
        let layout = MetaLayout(headerLength: headerLength, blockCount: header.blockCount)
        // The length follows from the header: a block count the bytes cannot hold is damage, found before any
        // allocation of its size.
        guard header.blockCount <= bytes.count, layout.length == bytes.count else {
            throw .inconsistent("meta block of \(bytes.count) bytes for \(header.blockCount) blocks")
        }
        var crcs = [UInt32](repeating: 0, count: header.blockCount)
        for index in crcs.indices { crcs[index] = try reader.readUInt32() }
        var newest: MetaSlot?
        for slot in 0..<2 {
            let start = layout.slotOffset(slot)
            // A torn or stale slot is no slot: the other one tells what is durable.
            guard let decoded = try? MetaSlot.decode(Array(bytes[start..<(start + layout.slotLength)]),
                                                     blockCount: header.blockCount),
                  decoded.generation == header.generation else { continue }
            if newest.map({ decoded.sequence > $0.sequence }) ?? true { newest = decoded }
        }
        if let newest {
            if newest.answeredAt != nil { header.answeredAt = newest.answeredAt }
            if newest.etagRetired { header.etag = "" }
        }
        return MetaBlock(header: header, layout: layout, crcs: crcs, slot: newest)
    }
}

/// The last 16 bytes of a small entry's file: where its meta block starts.
struct EntryFooter: Equatable, Sendable {
    static let magic = Array("RFSENTR2".utf8)
    static let length = 16

    var metaOffset: UInt64

    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(metaOffset)
        writer.write(raw: Self.magic)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(FormatError) -> EntryFooter {
        guard bytes.count == length else { throw .truncated }
        var reader = ByteReader(bytes)
        let offset = try reader.readUInt64()
        guard Array(try reader.readBytes(magic.count)) == magic else { throw .badMagic }
        guard offset <= UInt64(Int64.max) else { throw .inconsistent("meta offset \(offset)") }
        return EntryFooter(metaOffset: offset)
    }
}
