// The properties of the fuzz targets whose checks are not spelled twice: each harness in Tests/Fuzz calls them
// (bench/fuzz.sh compiles this file into every harness), and FuzzRegressionTests replays the kept inputs through
// the same functions. A function returns the first property its input breaks, or nil. Only the core's layers and the
// standard library are used here, so that the fuzz build needs nothing else of this target.

@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSSystem

/// The first property of the ResponseHead target that the head `bytes` frame breaks, or nil.
public func responseHeadPropertyBroken(_ bytes: [UInt8]) -> String? {
    let (head, asked) = responseHeadFraming(bytes)
    return responseHeadPropertyBroken(head, asked: asked)
}

/// The first property of the Redaction target that `bytes` break, or nil: as a password, a path and a query value,
/// and as any text.
public func redactionPropertyBroken(_ bytes: [UInt8]) -> String? {
    let (url, secrets) = redactionFraming(bytes)
    if let broken = redactionPropertyBroken(url, secrets: secrets) { return broken }
    let text = String(decoding: bytes, as: UTF8.self)
    let once = Redaction.redact(text)
    return Redaction.redact(once) == once ? nil : "redacting \(text.debugDescription) twice changes it"
}

/// The ResponseHead target's framing: a first line `STATUS FIRST LAST`, then `name: value` lines (lowercased names).
func responseHeadFraming(_ bytes: [UInt8]) -> (ResponseHead, Range<UInt64>) {
    let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
    let first = (lines.first ?? "").split(separator: " ").compactMap { UInt64($0) }
    let status = first.first.map { Int(min($0, 999)) } ?? 206
    let start = first.count > 1 ? min(first[1], UInt64(Int64.max) - 2) : 0
    let last = first.count > 2 ? max(start, min(first[2], UInt64(Int64.max) - 2)) : start + 65_535
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].trimmingWhitespace().lowercased()] = line[line.index(after: colon)...].trimmingWhitespace()
    }
    return (ResponseHead(status: status, headers: headers), start..<(last + 1))
}

/// The ResponseHead target's properties; the first one `head` breaks, or nil.
func responseHeadPropertyBroken(_ head: ResponseHead, asked: Range<UInt64>) -> String? {
    let span = UInt64(asked.count)
    let trusted = head.untrustedBody(expectedLength: span) == nil
    let type = head["content-type"]?.trimmingWhitespace().lowercased() ?? ""
    if trusted && type.hasPrefix("multipart/byteranges") { return "a multipart part was trusted: \(head)" }
    if head.foreignEncoding != nil && (trusted || head.untrustedBody(expectedLength: nil) == nil) {
        return "an encoded body was trusted: \(head)"
    }
    if trusted, head.statesItsLength, UInt64(head["content-length"]?.trimmingWhitespace() ?? "") != span {
        return "a trusted part states another length than its span \(span): \(head)"
    }
    if case .part(let contentRange) = head.carriedBytes(asked: asked), head.status == 200,
       contentRange.range?.lowerBound != asked.lowerBound {
        return "a 200 read as a part of other bytes than asked: \(head)"
    }
    let version = RemoteMetadata(url: "u", size: span, etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "")
    if version.isContradicted(by: version) { return "a version contradicts itself: \(version)" }
    let other = RemoteMetadata(url: "u", size: span, etag: head["x-other-etag"] ?? "", lastModified: head["date"] ?? "")
    if version.isContradicted(by: other) != other.isContradicted(by: version) {
        return "contradiction is not symmetric: \(version) and \(other)"
    }
    return nil
}

/// The Redaction target's framing: three parts split at NUL, a password, a path and a query value; the URL built
/// of them, and the secrets a redacted form must not show (those of four bytes or more that no other part holds).
func redactionFraming(_ bytes: [UInt8]) -> (url: String, secrets: [String]) {
    let parts = bytes.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    // Filtered by scalars: a combining mark after `#` makes one Character of both, which a Character filter keeps.
    let without = { (text: String, banned: String) in
        String(String.UnicodeScalarView(text.unicodeScalars.filter { !banned.unicodeScalars.contains($0) }))
    }
    let clean: (String) -> String = { without($0, "@/?#&\0") }
    let password = clean(parts.first ?? ""), value = clean(parts.count > 2 ? parts[2] : "")
    let path = parts.count > 1 ? without(parts[1], "?#\0") : ""
    let url = "https://user:\(password)@files.example.org/\(path)?token=\(value)&x=1#frag"
    let shown = "https://***@files.example.org/\(path)?token=***&x=***#***"
    let secrets = [password, value].filter { $0.utf8.count >= 4 && !containsBytes(Array(shown.utf8), Array($0.utf8)) }
    return (url, secrets)
}

/// The Redaction target's properties; the first one broken, or nil: no secret is shown, the userinfo and every
/// query value are hidden, and redacting twice gives what redacting once gave. Compared as bytes: a combining mark
/// after a `/` makes one Character of both, which a String comparison would not find as a prefix.
func redactionPropertyBroken(_ url: String, secrets: [String]) -> String? {
    let shown = Redaction.redact(url)
    let bytes = Array(shown.utf8)
    for secret in secrets where containsBytes(bytes, Array(secret.utf8)) {
        return "\(shown.debugDescription) shows \(secret.debugDescription)"
    }
    if !bytes.starts(with: Array("https://***@files.example.org/".utf8)) {
        return "the userinfo shows: \(shown.debugDescription)"
    }
    if Redaction.redact(shown) != shown { return "redacting \(shown.debugDescription) again changes it" }
    return nil
}

/// Whether `needle` occurs in `haystack`, byte for byte.
private func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, needle.count <= haystack.count else { return needle.isEmpty }
    return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
}

/// The first property of the MetaBlock target that `bytes` break, or nil. The first byte picks what the rest is:
/// a meta block (read as is, and with its header record and both slots sealed with their right CRC32C, so that
/// the fuzzer reaches the fields behind them), a slot (its block count in the next byte), or a footer.
public func metaBlockPropertyBroken(_ bytes: [UInt8]) -> String? {
    guard let kind = bytes.first else { return nil }
    let rest = Array(bytes.dropFirst())
    switch kind % 3 {
    case 0:
        for block in [rest, metaBlockSealed(rest)] {
            guard let meta = try? MetaBlock.decode(block) else { continue }  // damaged: the entry is empty
            if meta.layout.length != block.count { return "a meta block of \(block.count) bytes decoded as \(meta.layout.length)" }
            if meta.crcs.count != meta.header.blockCount { return "\(meta.crcs.count) CRCs for \(meta.header.blockCount) blocks" }
            // One encoding per header, its size known or not (a flag no version writes is damage, not a header).
            let record = Array(block[MetaLayout.prefixLength..<meta.layout.crcTableOffset])
            if let header = try? CacheHeader.decode(record), header.encoded() != record {
                return "header \(header) encodes to other bytes"
            }
            if let slot = meta.slot {
                if slot.generation != meta.header.generation { return "a slot of another generation counts" }
                if slot.present.blockCount != meta.header.blockCount { return "a slot of another block count counts" }
            }
        }
    case 1:
        guard let count = rest.first else { return nil }
        let slotBytes = Array(rest.dropFirst())
        for candidate in [slotBytes, sealedRecord(slotBytes)] {
            guard let slot = try? MetaSlot.decode(candidate, blockCount: Int(count)) else { continue }
            if slot.encoded() != candidate { return "slot \(slot) encodes to other bytes" }
        }
    default:
        guard let footer = try? EntryFooter.decode(rest) else { return nil }
        if footer.encoded() != rest { return "footer \(footer) encodes to other bytes" }
    }
    return nil
}

/// `bytes` with their last 4 bytes replaced by the CRC32C of all before them.
private func sealedRecord(_ bytes: [UInt8]) -> [UInt8] {
    guard bytes.count >= 4 else { return bytes }
    var sealed = Array(bytes.dropLast(4))
    withUnsafeBytes(of: CRC32C.checksum(sealed[...]).littleEndian) { sealed.append(contentsOf: $0) }
    return sealed
}

/// A meta block with its header record and both slots sealed, where its header length field allows.
private func metaBlockSealed(_ bytes: [UInt8]) -> [UInt8] {
    guard bytes.count >= MetaLayout.prefixLength else { return bytes }
    var reader = ByteReader(Array(bytes[12..<16]))
    guard let length = try? reader.readUInt32(), Int(length) <= bytes.count - MetaLayout.prefixLength else { return bytes }
    var sealed = bytes
    let headerEnd = MetaLayout.prefixLength + Int(length)
    sealed.replaceSubrange(MetaLayout.prefixLength..<headerEnd,
                           with: sealedRecord(Array(bytes[MetaLayout.prefixLength..<headerEnd])))
    guard let header = try? CacheHeader.decode(Array(sealed[MetaLayout.prefixLength..<headerEnd])) else { return sealed }
    let layout = MetaLayout(headerLength: Int(length), blockCount: header.blockCount)
    guard header.blockCount <= bytes.count, layout.length == bytes.count else { return sealed }
    for slot in 0..<2 {
        let range = layout.slotOffset(slot)..<(layout.slotOffset(slot) + layout.slotLength)
        sealed.replaceSubrange(range, with: sealedRecord(Array(sealed[range])))
    }
    return sealed
}

/// The records file the ListingRecords target's input `bytes` stands for: the first byte picks the framing. Even:
/// the rest as it is. Odd: the magic, the rest after its first byte, and a trailer sealing them, whose count is
/// that first byte (so that the fuzzer reaches the records behind a CRC it cannot guess).
public func listingRecordsFramed(_ bytes: [UInt8]) -> [UInt8] {
    guard let kind = bytes.first else { return [] }
    let rest = bytes.dropFirst()
    guard kind % 2 == 1, let count = rest.first else { return Array(rest) }
    var framed = ListingRecords.magic + rest.dropFirst()
    withUnsafeBytes(of: UInt32(count).littleEndian) { framed.append(contentsOf: $0) }
    withUnsafeBytes(of: CRC32C.checksum(framed[...]).littleEndian) { framed.append(contentsOf: $0) }
    return framed
}

/// The first property of the ListingRecords target (a kept or object store listing as records, read back from
/// disk) that `bytes`, framed by `listingRecordsFramed`, break, or nil: a file that reads is read whole (as many
/// records as its trailer states) and nothing of one that does not is handed on; the records read encode to a
/// file that reads back as the same records; a damaged file is told as such; and a file taken as a listing to add
/// whole (PlainListing) holds exactly the files the rules keep of it, as they keep them.
public func listingRecordsPropertyBroken(_ bytes: [UInt8]) -> String? {
    let file = listingRecordsFramed(bytes)
    var records: [ListingRecords.Record] = []
    let read = ListingRecords.forEach(file) { records.append($0) }
    if !read {
        if !records.isEmpty { return "a file that does not read handed on \(records.count) records" }
    } else if records.count != ListingRecords.statedCount(file) {
        return "\(records.count) records read where the trailer states \(ListingRecords.statedCount(file))"
    }
    if DirectoryListing.isDamagedRecords(file) != (ListingRecords.isRecords(file) && !read) {
        return "isDamagedRecords says \(DirectoryListing.isDamagedRecords(file)) of a file that reads: \(read)"
    }
    if let broken = plainListingPropertyBroken(file) { return broken }
    guard read else { return nil }
    var again: [ListingRecords.Record] = []
    guard ListingRecords.forEach(ListingRecords.encode(records), { again.append($0) }) else {
        return "the records read, written again, do not read"
    }
    return again == records ? nil : "records written again read back as others: \(records) against \(again)"
}

/// Whether records `file`, if taken as a listing to add whole (PlainListing.swift), break its promise: the files it
/// hands on are the entries `DirectoryListing`'s rules make of the same records, with nothing skipped or left out.
private func plainListingPropertyBroken(_ file: [UInt8]) -> String? {
    guard let plain = PlainListing(records: file) else { return nil }
    let parsed = DirectoryListing.parse(file, base: "http://h/d/")
    var files: [PlainListing.File] = []
    plain.forEach { files.append($0) }
    guard files.count == plain.count, parsed.skipped.isEmpty, parsed.controlNames.isEmpty, !parsed.truncated,
          files.count == parsed.entries.count else {
        return "a listing added whole holds \(files.count) files where the rules keep \(parsed.entries.count)"
    }
    for (file, entry) in zip(files, parsed.entries) {
        let same = file.name.utf8.elementsEqual(entry.name.utf8) && !entry.isDirectory && file.size == entry.size
            && file.modificationTime == entry.modificationTime && file.precision == entry.datePrecision
            && file.etag == StoredETag(entry.etag ?? "")
            && EntryNaming.sanitize(entry.name).utf8.elementsEqual(entry.name.utf8)
        if !same { return "the file \(file) added whole is \(entry) by the rules" }
    }
    return nil
}
