// Rock Ridge (IEEE P1282) fields in a directory record's System Use area, through SUSP (P1281): a POSIX name (NM),
// mode (PX), modification time (TF) and symlink target (SL), continued elsewhere on the image by CE. A record of a
// relocated folder (RE) is skipped: it shows where it belongs through its CL. Every length is checked against its
// area, and continuation areas are bounded in number and size, so a record cannot send the reader round a loop.
import RangeFSSystem

/// What Rock Ridge says of one directory record.
struct RockRidgeFields {
    var name: String?
    var mode: UInt32?
    var modificationTime: Int64?
    var linkTarget: String?
    /// RE: a relocated folder's record, not to be listed where it is.
    var relocated = false
    /// NM's CURRENT or PARENT flag: the record is `.` or `..`.
    var selfOrParent = false
    /// SP's LEN_SKP, read from the root's first record: bytes to skip before each record's fields.
    var skip: Int?

    private static let maximumContinuations = 8

    /// Reads the fields in `area`, following CE continuation areas through `read` (image offset, count).
    init(_ area: [UInt8], read: (Int64, Int) throws -> [UInt8]) throws {
        var area = area
        var continuations = 0
        var nameParts: [UInt8] = []
        var linkParts: [String] = []
        var linkComponent: [UInt8] = []
        var sawName = false, sawLink = false
        while true {
            var continuation: (offset: Int64, length: Int)?
            var position = 0
            entries: while position + 4 <= area.count {
                let signature = String(decoding: area[position..<(position + 2)], as: UTF8.self)
                let length = Int(area[position + 2])
                guard length >= 4, position + length <= area.count else { break }
                let body = Array(area[(position + 4)..<(position + length)])
                switch signature {
                case "SP" where body.count >= 3 && body[0] == 0xBE && body[1] == 0xEF:
                    skip = Int(body[2])
                case "NM" where !body.isEmpty:
                    if body[0] & 6 != 0 { selfOrParent = true }
                    nameParts += body.dropFirst()
                    sawName = true
                case "PX" where body.count >= 4:
                    mode = body.littleEndian32(at: 0)
                case "TF" where !body.isEmpty:
                    modificationTime = Self.modificationTime(flags: body[0], stamps: Array(body.dropFirst()))
                case "SL" where !body.isEmpty:
                    sawLink = true
                    var component = 1
                    while component + 2 <= body.count {
                        let flags = body[component], count = Int(body[component + 1])
                        guard component + 2 + count <= body.count else { break }
                        linkComponent += body[(component + 2)..<(component + 2 + count)]
                        if flags & 1 == 0 {  // the component ends here
                            let text = flags & 2 != 0 ? "." : flags & 4 != 0 ? ".." : flags & 8 != 0 ? ""
                                : String(decoding: linkComponent, as: UTF8.self)
                            linkParts.append(text)
                            linkComponent = []
                        }
                        component += 2 + count
                    }
                case "RE":
                    relocated = true
                case "CE" where body.count >= 24:
                    continuation = (Int64(body.littleEndian32(at: 0)) * 2048 + Int64(body.littleEndian32(at: 8)),
                                    Int(body.littleEndian32(at: 16)))
                case "ST":
                    break entries
                default:
                    break
                }
                position += length
            }
            guard let next = continuation, continuations < Self.maximumContinuations, next.length <= 2048 else { break }
            continuations += 1
            area = try read(next.offset, next.length)
        }
        if sawName { name = String(decoding: nameParts, as: UTF8.self) }
        if sawLink {
            // A leading root component ("") makes the target absolute: "" joined with the rest gives "/rest".
            linkTarget = linkParts == [""] ? "/" : linkParts.joined(separator: "/")
        }
    }

    /// TF's modification stamp: after the creation stamp when there is one; 7-byte stamps (17-byte long form
    /// when bit 7 is set).
    private static func modificationTime(flags: UInt8, stamps: [UInt8]) -> Int64? {
        guard flags & 2 != 0 else { return nil }
        let width = flags & 0x80 != 0 ? 17 : 7
        let start = flags & 1 != 0 ? width : 0
        guard start + width <= stamps.count else { return nil }
        if width == 7 { return isoRecordTime(Array(stamps[start..<(start + 7)])) }
        let digits = String(decoding: stamps[start..<(start + 14)], as: UTF8.self)
        guard digits.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        func field(_ from: Int, _ count: Int) -> Int { Int(digits.dropFirst(from).prefix(count))! }
        let days = HTTPDate.daysSinceEpoch(year: field(0, 4), month: field(4, 2), day: field(6, 2))
        let offset = Int64(Int8(bitPattern: stamps[start + 16])) * 15 * 60
        return days * 86_400 + Int64(field(8, 2) * 3600 + field(10, 2) * 60 + field(12, 2)) - offset
    }
}

/// A directory record's 7-byte date (years since 1900, month, day, hour, minute, second, offset from UTC in
/// quarter hours) as seconds since the epoch; nil for a date that is none.
func isoRecordTime(_ bytes: [UInt8]) -> Int64? {
    guard bytes.count >= 7, (1...12).contains(bytes[1]), (1...31).contains(bytes[2]), bytes[3] < 24, bytes[4] < 60,
          bytes[5] < 61 else { return nil }
    let days = HTTPDate.daysSinceEpoch(year: 1900 + Int(bytes[0]), month: Int(bytes[1]), day: Int(bytes[2]))
    let offset = Int64(Int8(bitPattern: bytes[6])) * 15 * 60
    return days * 86_400 + Int64(bytes[3]) * 3600 + Int64(bytes[4]) * 60 + Int64(bytes[5]) - offset
}
