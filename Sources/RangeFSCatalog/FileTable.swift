// The catalog's files (CatalogState.swift) in compact form: a million listed files must fit in a few hundred MB
// at most (issue 46: 300 bytes of RSS per listed entry). A `CatalogItem` as handed out holds its full URL and its
// Last-Modified as text, two heap strings of some 50 and 29 bytes plus their allocation headers, and a
// `RemoteMetadata` of about 200 bytes inline: 691 bytes of daemon RSS per entry of a 200,000-file nginx JSON
// listing, all told. A listed file's URL is its directory's URL plus its percent-encoded name, and its date as
// text is its listed date formatted: neither need be kept.
//
// So a file is stored as `StoredFile`: its name, the index of its directory's URL (kept once per table), size,
// date as seconds, ETag and flags. Whatever cannot be derived exactly (a URL that is
// not the directory's plus the encoded name, a date that does not format back to the same text, a suggested
// name, mirrors, a digest) keeps the whole metadata in a box, so that every item reads back exactly as stored:
// `StoredFile.init` checks the derivation byte for byte before it leaves anything out.

import RangeFSCache
import RangeFSPlatform
import RangeFSSystem

/// The files by inode number, each kept compact and rebuilt as a `CatalogItem` when read.
struct FileTable {
    private var table = InodeTable<StoredFile>(first: 2)
    /// The directory URLs that files derive theirs from, each once: a file holds its index (4 bytes, where the
    /// string would take 16).
    private var bases: [String] = []
    private var baseIndexes: [String: UInt32] = [:]

    /// The files held.
    var count: Int { table.count }

    subscript(inode: UInt64) -> CatalogItem? {
        table[inode].map { $0.item(inode: inode, bases: bases) }
    }

    /// The name of file `inode`, without rebuilding the rest: sorting and binary searches ask for it often.
    func name(of inode: UInt64) -> String? {
        table[inode]?.name
    }

    /// The size of file `inode`, without rebuilding the rest.
    func size(of inode: UInt64) -> UInt64? {
        table[inode]?.size
    }

    /// What a directory read shows of file `inode` when it is a listed file that no probe has seen, whose URL and
    /// date derive from its listing (the plain kind a listing adds, `storeListed`): read from the stored fields,
    /// with no URL, date or ETag made as text. Nil for any other file.
    func listedAttributes(of inode: UInt64) -> ListedAttributes? {
        guard let stored = table[inode], stored.box == nil, stored.flags.contains(.listed),
              !stored.flags.contains(.validated) else { return nil }
        return ListedAttributes(name: stored.name, size: stored.size,
                                listedTime: stored.flags.contains(.hasListedTime) ? stored.listedTime : nil,
                                attributesExact: stored.flags.contains(.attributesExact))
    }

    /// Whether file `inode`'s URL is derived from its directory's (and so not in the catalog's URL index).
    func derivesURL(_ inode: UInt64) -> Bool {
        guard let stored = table[inode] else { return false }
        return stored.box == nil
    }

    /// Puts `item` at its inode; `base` is the URL of its directory, from which its URL may be derived.
    mutating func store(_ item: CatalogItem, base: String?) {
        let index = base.map { baseIndex(of: $0) }
        table.updateValue(StoredFile(item, base: base, baseIndex: index ?? 0), forKey: item.inode)
    }

    /// Puts a new listed file at `inode` whose URL is its directory's (at `baseIndex`, from `baseIndex(of:)`) plus
    /// its encoded name and whose Last-Modified is its listed date formatted (a listing's new child:
    /// Catalog.addListed), without building either as text.
    mutating func storeListed(inode: UInt64, name: String, parent: UInt64, baseIndex: UInt32, size: UInt64,
                              etag: StoredETag, listedTime: Int64?, precision: ListedPrecision, attributesExact: Bool) {
        let stored = StoredFile(listedName: name, parent: parent, size: size, etag: etag, listedTime: listedTime,
                                precision: precision, attributesExact: attributesExact, baseIndex: baseIndex)
        table.updateValue(stored, forKey: inode)
    }

    /// Makes room for files up to inode `last` at once (a listing added whole), not slot by slot.
    mutating func reserve(through last: UInt64) {
        table.reserve(through: last)
    }

    /// Where the directory URL `base` is kept (added if it is not yet).
    mutating func baseIndex(of base: String) -> UInt32 {
        if let known = baseIndexes[base] { return known }
        bases.append(base)
        baseIndexes[base] = UInt32(bases.count - 1)
        return UInt32(bases.count - 1)
    }

    /// Empties the slot of `inode`; returns what was there.
    @discardableResult
    mutating func removeValue(forKey inode: UInt64) -> CatalogItem? {
        table.removeValue(forKey: inode).map { $0.item(inode: inode, bases: bases) }
    }

    /// The files held that no listing found (mounted one by one), in inode order: read from their stored flags,
    /// so that a million listed files are not rebuilt to be left out (the saved set is written at every mount).
    var unlisted: [CatalogItem] {
        var items: [CatalogItem] = []
        table.forEach { inode, stored in
            if !stored.flags.contains(.listed) { items.append(stored.item(inode: inode, bases: bases)) }
        }
        return items
    }

    /// The files held, in inode order.
    var values: [CatalogItem] {
        var items: [CatalogItem] = []
        items.reserveCapacity(table.count)
        table.forEach { inode, stored in items.append(stored.item(inode: inode, bases: bases)) }
        return items
    }
}

/// A plain listed file as a directory read shows it (`FileTable.listedAttributes`): what its listing stated.
package struct ListedAttributes: Equatable {
    let name: String
    package let size: UInt64
    /// The date its listing states (seconds since 1970), if any.
    package let listedTime: Int64?
    /// Whether the listing stated its size exactly and its date, so that `ls -l` needs no probe.
    package let attributesExact: Bool
}

/// One file as the catalog keeps it: what a `CatalogItem` holds, less what can be derived.
struct StoredFile {
    /// What a file holds that cannot be derived: its whole metadata, in one allocation shared by copies.
    final class Box: Sendable {
        let metadata: RemoteMetadata
        init(_ metadata: RemoteMetadata) { self.metadata = metadata }
    }

    struct Flags: OptionSet {
        let rawValue: UInt8
        static let listed = Flags(rawValue: 1)
        static let validated = Flags(rawValue: 2)
        static let attributesExact = Flags(rawValue: 4)
        static let hasListedTime = Flags(rawValue: 8)
        static let secondPrecision = Flags(rawValue: 16)
        /// Its Last-Modified is `listedTime` formatted (else it is empty, or in `box`).
        static let datedByListing = Flags(rawValue: 32)
    }

    // In this order, so that the 17 bytes of `etag` and the flags fill what `base` leaves: 72 bytes in all.
    let name: String
    let parent: UInt64
    let size: UInt64
    let listedTime: Int64
    /// The whole metadata, when some of it cannot be derived; nil for a plain listed file.
    let box: Box?
    let etag: StoredETag
    let flags: Flags
    /// Where its directory's URL is in `FileTable.bases`, when its own URL is that plus its encoded name (then
    /// it has no `box`).
    let base: UInt32

    init(_ item: CatalogItem, base directoryURL: String?, baseIndex: UInt32) {
        let metadata = item.metadata
        name = item.name
        parent = item.parent
        size = metadata.size
        etag = StoredETag(metadata.etag)
        listedTime = item.listedTime ?? 0
        var flags: Flags = []
        if item.listed { flags.insert(.listed) }
        if item.validated { flags.insert(.validated) }
        if item.attributesExact { flags.insert(.attributesExact) }
        if item.listedTime != nil { flags.insert(.hasListedTime) }
        if item.listedPrecision == .second { flags.insert(.secondPrecision) }
        let dateDerived: Bool
        if metadata.lastModified.isEmpty {
            dateDerived = true
        } else if let time = item.listedTime, HTTPDate.format(time).utf8.elementsEqual(metadata.lastModified.utf8) {
            flags.insert(.datedByListing)
            dateDerived = true
        } else {
            dateDerived = false
        }
        let plain = metadata.sizeKnown && metadata.suggestedName == nil && metadata.duplicates.isEmpty
            && metadata.announcedDigest == nil && metadata.answeredAt == nil
        if let directoryURL, plain, dateDerived,
           Self.url(base: directoryURL, name: item.name).utf8.elementsEqual(metadata.url.utf8) {
            base = baseIndex
            box = nil
        } else {
            base = 0
            box = Box(metadata)
        }
        self.flags = flags
    }

    /// A listed file that no probe has seen, whose URL derives from its directory's and whose Last-Modified, if
    /// any, is `listedTime` formatted.
    init(listedName name: String, parent: UInt64, size: UInt64, etag: StoredETag, listedTime: Int64?,
         precision: ListedPrecision, attributesExact: Bool, baseIndex: UInt32) {
        self.name = name
        self.parent = parent
        self.size = size
        self.etag = etag
        self.listedTime = listedTime ?? 0
        var flags: Flags = [.listed]
        if attributesExact { flags.insert(.attributesExact) }
        if listedTime != nil { flags.formUnion([.hasListedTime, .datedByListing]) }
        if precision == .second { flags.insert(.secondPrecision) }
        self.flags = flags
        box = nil
        base = baseIndex
    }

    /// The file as the catalog hands it out.
    func item(inode: UInt64, bases: [String]) -> CatalogItem {
        let metadata: RemoteMetadata
        if let box {
            metadata = box.metadata
        } else {
            let date = flags.contains(.datedByListing) ? HTTPDate.format(listedTime) : ""
            metadata = RemoteMetadata(url: Self.url(base: bases[Int(base)], name: name), size: size,
                                      etag: etag.text, lastModified: date)
        }
        var item = CatalogItem(inode: inode, name: name, metadata: metadata, parent: parent,
                               listed: flags.contains(.listed), validated: flags.contains(.validated),
                               attributesExact: flags.contains(.attributesExact))
        item.listedTime = flags.contains(.hasListedTime) ? listedTime : nil
        item.listedPrecision = flags.contains(.secondPrecision) ? .second : .minute
        return item
    }

    /// The URL of `name` in the directory at `base`: as a listing's parse makes it.
    static func url(base: String, name: String) -> String {
        DirectoryListing.encodeSegment(name, after: base)
    }

    /// The percent-decoded bytes of `segment` as a name, for finding a file by its URL; nil if they are not UTF-8
    /// (then no derived URL can be `segment`'s). A malformed escape is kept as written: the URL compared after the
    /// lookup rules it out.
    static func decodedName(_ segment: Substring) -> String? {
        String(validating: PercentEncoding.bytes(String(segment)), as: UTF8.self)
    }
}

/// A listed file's ETag as kept. An object store's usual one, an MD5 in quotes and lowercase hex, is 34 bytes of
/// text: a heap string of 80 bytes with its header, for every object listed (issue 46). It is kept as its 16
/// bytes instead; any other ETag (weak, multipart `-N`, upper case, none) exactly as written.
enum StoredETag: Equatable {
    case md5(UInt64, UInt64)
    case text(String)

    init(_ etag: String) {
        var text = etag
        // SAFETY: the buffer is the string's own contiguous UTF-8, read only inside the closure.
        if let halves = text.withUTF8(Self.md5) {
            self = .md5(halves.0, halves.1)
        } else {
            self = .text(etag)
        }
    }

    /// The ETag whose UTF-8 bytes are `bytes` (a kept listing's record), with no string made for an MD5 one.
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        if let halves = Self.md5(bytes) {
            self = .md5(halves.0, halves.1)
        } else {
            self = .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// The two halves of an MD5 ETag (in quotes, lowercase hex) whose bytes are `bytes`; nil for any other.
    private static func md5(_ bytes: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64)? {
        guard bytes.count == 34, bytes[0] == UInt8(ascii: "\""), bytes[33] == UInt8(ascii: "\"") else { return nil }
        // From a table, with no branch per digit: a million ETags' digits, read by a switch each, mispredicted
        // their way to a third of an offline remount's CPU (issue 46).
        let values = hexValues
        var halves: (UInt64, UInt64) = (0, 0)
        var invalid: UInt8 = 0
        for index in 0..<16 {
            let high = values[Int(bytes[index + 1])], low = values[Int(bytes[index + 17])]
            invalid |= high | low
            halves.0 = halves.0 << 4 | UInt64(high & 15)
            halves.1 = halves.1 << 4 | UInt64(low & 15)
        }
        return invalid < 16 ? halves : nil
    }

    /// The value of each byte as a lowercase hex digit; 0xFF for a byte that is not one.
    private static let hexValues: [UInt8] = (0..<256).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        default: 0xFF
        }
    }

    /// The ETag as it was written.
    var text: String {
        switch self {
        case .text(let text): return text
        case .md5(let high, let low):
            let digits = Array("0123456789abcdef".utf8)
            var bytes = [UInt8](repeating: UInt8(ascii: "\""), count: 34)
            for index in 0..<16 {
                bytes[16 - index] = digits[Int(high >> (4 * UInt64(index)) & 15)]
                bytes[32 - index] = digits[Int(low >> (4 * UInt64(index)) & 15)]
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
