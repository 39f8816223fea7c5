// Fuzz target: the records of a cache entry's folder as read back from disk (CacheFormat.swift): `header`,
// `bitmap`, `stream-state` and `digest`. The first input byte picks the record, the rest is the file; the file is
// read as it is and again sealed with its right CRC32C, so that the fuzzer reaches the fields behind the checksum.
// Properties: a record that decodes encodes to the bytes it came from (header, stream-state) or to a record that
// decodes to itself (bitmap, digest); what the cache computes from a decoded header (its block count) is defined;
// a bitmap's count of set bits matches its bits.

@testable import RangeFSCache
@testable import RangeFSSystem

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheRecords(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard let kind = bytes.first else { return 0 }
    let file = Array(bytes.dropFirst())
    var sealed = file
    // The record's trailer: CRC32C of all before it, little-endian.
    withUnsafeBytes(of: CRC32C.checksum(file[...]).littleEndian) { sealed.append(contentsOf: $0) }
    for record in [file, sealed] {
        switch kind % 4 {
        case 0: checkHeader(record)
        case 1: checkBitmap(record)
        case 2: checkStream(record)
        default: checkDigest(record)
        }
    }
    return 0
}

private func checkHeader(_ record: [UInt8]) {
    guard let header = try? CacheHeader.decode(record) else { return }  // damaged: the entry is empty
    fuzzRequire(header.encoded() == record, "header \(header) encodes to other bytes")
    // Opening the entry sizes its bitmap and CRC table by the block count.
    fuzzRequire(header.blockSize > 0, "block size \(header.blockSize)")
    let blocks = header.size / UInt64(header.blockSize) + (header.size % UInt64(header.blockSize) == 0 ? 0 : 1)
    fuzzRequire(blocks <= UInt64(Int.max) && header.blockCount == Int(blocks), "block count of \(header.size) bytes")
}

private func checkBitmap(_ record: [UInt8]) {
    guard let bitmap = try? BitmapRecord.decode(record) else { return }
    let again = try? BitmapRecord.decode(bitmap.encoded())
    fuzzRequire(again == bitmap, "bitmap of \(bitmap.present.blockCount) blocks reads back differently")
    let present = bitmap.present
    let counted = (0..<present.blockCount).filter(present.contains).count
    fuzzRequire(counted == present.setCount, "\(present.setCount) bits counted, \(counted) set")
}

private func checkStream(_ record: [UInt8]) {
    guard let stream = try? StreamRecord.decode(record) else { return }
    fuzzRequire(stream.encoded() == record, "stream record \(stream) encodes to other bytes")
}

private func checkDigest(_ record: [UInt8]) {
    guard let digest = try? DigestRecord.decode(record) else { return }
    fuzzRequire((try? DigestRecord.decode(digest.encoded())) == digest,
                "digest record \(digest) reads back differently")
}
