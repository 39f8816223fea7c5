// Fixed-width fields of archive structures. Callers check the bounds first (a structure's whole length is read
// before its fields), so these index directly.
import RangeFSSystem

extension Array where Element == UInt8 {
    func littleEndian16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    func littleEndian32(at offset: Int) -> UInt32 {
        UInt32(littleEndian16(at: offset)) | UInt32(littleEndian16(at: offset + 2)) << 16
    }

    func littleEndian64(at offset: Int) -> UInt64 {
        UInt64(littleEndian32(at: offset)) | UInt64(littleEndian32(at: offset + 4)) << 32
    }

    /// Whether the four bytes at `offset` are `signature` (zip's `PK..`), read little-endian.
    func hasSignature(_ signature: UInt32, at offset: Int) -> Bool {
        offset >= 0 && offset + 4 <= count && littleEndian32(at: offset) == signature
    }
}

/// MS-DOS date and time fields (zip) as seconds since the epoch, read as UTC as unzip -l shows them with TZ=UTC;
/// nil for a date that is none (month 0, say).
func dosTime(date: UInt16, time: UInt16) -> Int64? {
    let year = Int(date >> 9) + 1980, month = Int(date >> 5 & 15), day = Int(date & 31)
    let hour = Int64(time >> 11), minute = Int64(time >> 5 & 63), second = Int64(time & 31) * 2
    guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
    return HTTPDate.daysSinceEpoch(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
}
