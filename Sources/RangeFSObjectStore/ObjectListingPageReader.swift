// A ListObjectsV2 page read straight to what its records need (issue 46): the bytes of each file's name, its size,
// date and ETag, with no tree of elements, no page of strings and no object per key in between. A million objects
// are 1,000 pages, and building ShallowXML's tree and then ObjectListingPage's strings cost about 5 µs an object,
// most of a listing's CPU.
//
// It reads a plain subset of XML, the one object stores write: an optional UTF-8 declaration, a ListBucketResult
// root (its attributes skipped), elements without attributes or namespace prefixes, text with the five named
// entities, and self-closing elements. Anything else (a comment, CDATA, a numeric reference, a carriage return,
// a prefix, a byte-order mark, an attribute below the root, nesting past `maximumDepth`) and anything the full
// reader would refuse (a field given twice, a Contents without Key, a key that is not UTF-8, an IsTruncated that is
// neither true nor false) makes it give the page up: `read` returns false and the page is read by
// ObjectListingXML.page, which decides. So what this reads, it reads as that reader does (ObjectListingPageReaderTests
// compares the two over the fuzzer's pages); it never accepts what that reader refuses.
import RangeFSSystem

/// Reads one page at a time; its buffers are kept from page to page.
package struct ObjectListingPageReader {
    /// One object under the listed prefix, its name not empty: ranges are into `decoded`.
    package struct File {
        package var name: Range<Int>
        package var size: UInt64?
        package var modificationTime: Int64?
        /// The ETag without its quotes, nil when the page gives none or an empty one.
        package var etag: Range<Int>?
    }

    /// Deeper elements than this give the page up (S3's answers go four deep: Contents, Owner, ID).
    package static let maximumDepth = 8

    /// The listed prefix: keys are named by what follows it.
    package let prefix: [UInt8]
    /// Names, ETags and CommonPrefixes of the last page read, decoded, back to back.
    package private(set) var decoded: [UInt8] = []
    package private(set) var files: [File] = []
    /// The CommonPrefixes, whole (ranges into `decoded`).
    package private(set) var folders: [Range<Int>] = []
    package private(set) var isTruncated = false
    package private(set) var nextContinuationToken: String?

    /// A field's text as it stands in the page: its range, and whether it holds a reference to decode.
    fileprivate struct Text {
        package var range: Range<Int>
        package var hasReference: Bool
    }

    /// A Contents as read, before its key is decoded (the EncodingType may come after it).
    private struct RawObject {
        package var key: Text?
        package var size: Text?
        package var etag: Text?
        package var lastModified: Text?
    }

    private var bytes: [UInt8] = []
    private var index = 0
    private var rawObjects: [RawObject] = []
    private var rawFolders: [Text] = []
    private var scratch: [UInt8] = []
    /// Whether the last tag `openTag` read closed itself (`<Prefix/>`).
    private var selfClosed = false

    package init(prefix: String) {
        self.prefix = Array(prefix.utf8)
    }

    /// Reads the page `page`; false when it is not of the plain kind read here (its files are then not to be used).
    package mutating func read(_ page: [UInt8]) -> Bool {
        bytes = page
        defer { bytes = [] }
        index = 0
        decoded.removeAll(keepingCapacity: true)
        files.removeAll(keepingCapacity: true)
        folders.removeAll(keepingCapacity: true)
        rawObjects.removeAll(keepingCapacity: true)
        rawFolders.removeAll(keepingCapacity: true)
        isTruncated = false
        nextContinuationToken = nil
        guard let fields = document() else { return false }
        return finish(fields)
    }

    // MARK: The document

    /// The root's fields, once the document was read to its end; nil to give the page up.
    private mutating func document() -> [Field: Text]? {
        if bytes.starts(with: Array("<?xml".utf8)) {
            guard let close = PageText.find(Array("?>".utf8), in: bytes[5...]) else { return nil }
            guard PageText.namesUTF8(bytes[5..<close]) else { return nil }
            index = close + 2
        }
        skipSpace()
        if let root = openTag() {
            guard root.elementsEqual(Self.rootName), !selfClosed else { return nil }
        } else {
            guard rootWithAttributes() else { return nil }
        }
        var fields: [Field: Text] = [:]
        while true {
            guard skipSpaceToTag() else { return nil }
            if bytes[index + 1] == UInt8(ascii: "/") {
                guard closeTag(named: Self.rootName[...]) else { return nil }
                skipSpace()
                return index == bytes.count ? fields : nil
            }
            guard let name = openTag() else { return nil }
            if name.elementsEqual(Self.contentsName) {
                guard let object = contents() else { return nil }
                rawObjects.append(object)
            } else if name.elementsEqual(Self.commonPrefixesName) {
                guard commonPrefixes() else { return nil }
            } else if let field = Field(name) {
                guard fields[field] == nil, let text = leaf(named: name) else { return nil }
                fields[field] = text
            } else {
                guard skip(named: name, depth: 2) else { return nil }
            }
        }
    }

    /// The root's fields read once each (the full reader refuses a second).
    fileprivate enum Field: String, CaseIterable {
        case isTruncated = "IsTruncated", nextContinuationToken = "NextContinuationToken"
        case continuationToken = "ContinuationToken", prefix = "Prefix", delimiter = "Delimiter"
        case startAfter = "StartAfter", encodingType = "EncodingType"

        package static let names: [(bytes: [UInt8], field: Field)] = allCases.map { (Array($0.rawValue.utf8), $0) }

        package init?(_ name: ArraySlice<UInt8>) {
            guard let found = Self.names.first(where: { name.elementsEqual($0.bytes) }) else { return nil }
            self = found.field
        }
    }

    private static let contentsName = Array("Contents".utf8)
    private static let commonPrefixesName = Array("CommonPrefixes".utf8)
    private static let rootName = Array("ListBucketResult".utf8)
    private static let keyName = Array("Key".utf8)
    private static let sizeName = Array("Size".utf8)
    private static let etagName = Array("ETag".utf8)
    private static let lastModifiedName = Array("LastModified".utf8)
    private static let prefixName = Array("Prefix".utf8)

    /// A `<ListBucketResult` with attributes (`xmlns`), each a name, `=` and a quoted value, up to its `>`.
    private mutating func rootWithAttributes() -> Bool {
        guard index + 1 + Self.rootName.count <= bytes.count, bytes[index] == UInt8(ascii: "<"),
              bytes[(index + 1)..<(index + 1 + Self.rootName.count)].elementsEqual(Self.rootName) else { return false }
        index += 1 + Self.rootName.count
        guard index < bytes.count, ShallowXML.isSpace(bytes[index]) else { return false }
        while true {
            skipSpace()
            guard index < bytes.count else { return false }
            if bytes[index] == UInt8(ascii: ">") {
                index += 1
                return true
            }
            let start = index
            while index < bytes.count, ShallowXML.isNameByte(bytes[index]) { index += 1 }
            guard index > start, index + 1 < bytes.count, bytes[index] == UInt8(ascii: "="),
                  bytes[index + 1] == UInt8(ascii: "\"") || bytes[index + 1] == UInt8(ascii: "'") else { return false }
            let quote = bytes[index + 1]
            guard let close = bytes[(index + 2)...].firstIndex(of: quote),
                  !bytes[(index + 2)..<close].contains(UInt8(ascii: "<")),
                  !bytes[(index + 2)..<close].contains(UInt8(ascii: "&")) else { return false }
            index = close + 1
        }
    }

    /// A Contents' fields, up to its end tag.
    private mutating func contents() -> RawObject? {
        var object = RawObject()
        while true {
            guard skipSpaceToTag() else { return nil }
            if bytes[index + 1] == UInt8(ascii: "/") {
                guard closeTag(named: Self.contentsName[...]), object.key != nil else { return nil }
                return object
            }
            guard let name = openTag() else { return nil }
            // Told by their length first: most tags of a page are these four.
            if name.count == 3, name.elementsEqual(Self.keyName) {
                guard object.key == nil, let text = leaf(named: name) else { return nil }
                object.key = text
            } else if name.count == 4, name.elementsEqual(Self.sizeName) {
                guard object.size == nil, let text = leaf(named: name) else { return nil }
                object.size = text
            } else if name.count == 4, name.elementsEqual(Self.etagName) {
                guard object.etag == nil, let text = leaf(named: name) else { return nil }
                object.etag = text
            } else if name.count == 12, name.elementsEqual(Self.lastModifiedName) {
                guard object.lastModified == nil, let text = leaf(named: name) else { return nil }
                object.lastModified = text
            } else {
                guard skip(named: name, depth: 3) else { return nil }
            }
        }
    }

    /// A CommonPrefixes' Prefix elements, up to its end tag.
    private mutating func commonPrefixes() -> Bool {
        while true {
            guard skipSpaceToTag() else { return false }
            if bytes[index + 1] == UInt8(ascii: "/") { return closeTag(named: Self.commonPrefixesName[...]) }
            guard let name = openTag() else { return false }
            if name.elementsEqual(Self.prefixName) {
                guard let text = leaf(named: name) else { return false }
                rawFolders.append(text)
            } else {
                guard skip(named: name, depth: 3) else { return false }
            }
        }
    }

    // MARK: Elements

    /// `<name>` or `<name/>` at `index` (no attributes): the name, with `index` past the tag and `selfClosed` set
    /// for the second. Nil for anything else.
    private mutating func openTag() -> ArraySlice<UInt8>? {
        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "<") else { return nil }
        let start = index + 1
        var end = start
        while end < bytes.count, ShallowXML.isNameByte(bytes[end]) { end += 1 }
        guard end > start, end < bytes.count, !bytes[start..<end].contains(UInt8(ascii: ":")) else { return nil }
        if bytes[end] == UInt8(ascii: ">") {
            selfClosed = false
            index = end + 1
        } else if bytes[end] == UInt8(ascii: "/"), end + 1 < bytes.count, bytes[end + 1] == UInt8(ascii: ">") {
            selfClosed = true
            index = end + 2
        } else {
            return nil
        }
        return bytes[start..<end]
    }

    /// `</name>` at `index` (space allowed before its `>`), with `index` moved past it.
    private mutating func closeTag(named name: ArraySlice<UInt8>) -> Bool {
        let start = index + 2
        let end = start + name.count
        guard end <= bytes.count, bytes[start..<end].elementsEqual(name) else { return false }
        index = end
        guard index < bytes.count, !ShallowXML.isNameByte(bytes[index]) else { return false }
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ">") else { return false }
        index += 1
        return true
    }

    /// The text of an element that holds only text, up to its end tag (the tag just read was `<name>`).
    private mutating func leaf(named name: ArraySlice<UInt8>) -> Text? {
        if selfClosed { return Text(range: index..<index, hasReference: false) }
        guard let text = text() else { return nil }
        guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "/"), closeTag(named: name) else { return nil }
        return text
    }

    /// Skips an element the page's reading does not need (the tag just read was `<name>`), its text and the elements
    /// in it checked as the full reader checks them.
    private mutating func skip(named name: ArraySlice<UInt8>, depth: Int) -> Bool {
        if selfClosed { return true }
        guard depth <= Self.maximumDepth else { return false }
        while true {
            guard text() != nil, index + 1 < bytes.count else { return false }
            if bytes[index + 1] == UInt8(ascii: "/") { return closeTag(named: name) }
            guard let inner = openTag(), skip(named: inner, depth: depth + 1) else { return false }
        }
    }

    /// Character data from `index` up to the next `<`, which must open or close an element: nil for a carriage
    /// return, a reference other than the five named ones, or markup of another kind.
    private mutating func text() -> Text? {
        let start = index
        var hasReference = false
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "<"):
                guard index + 1 < bytes.count, bytes[index + 1] != UInt8(ascii: "!"),
                      bytes[index + 1] != UInt8(ascii: "?") else { return nil }
                return Text(range: start..<index, hasReference: hasReference)
            case UInt8(ascii: "&"):
                guard PageText.namedEntity(bytes[(index + 1)...]) != nil else { return nil }
                hasReference = true
            case 0x0D:
                return nil
            default:
                break
            }
            index += 1
        }
        return nil
    }

    /// Moves past white space to the `<` of a tag; false when the document ends or holds other text there.
    private mutating func skipSpaceToTag() -> Bool {
        skipSpace()
        return index + 1 < bytes.count && bytes[index] == UInt8(ascii: "<") && bytes[index + 1] != UInt8(ascii: "!")
            && bytes[index + 1] != UInt8(ascii: "?")
    }

    private mutating func skipSpace() {
        while index < bytes.count, ShallowXML.isSpace(bytes[index]) { index += 1 }
    }
}

extension ObjectListingPageReader {
    // MARK: Values

    /// Decodes what was read into `files`, `folders` and the page's end, as ObjectListingXML reads the same fields;
    /// false to give the page up where that reader would refuse it.
    fileprivate mutating func finish(_ fields: [Field: Text]) -> Bool {
        var urlEncoded = false
        if let encoding = fields[.encodingType] {
            guard let value = checkedPlain(encoding) else { return false }
            let trimmed = String(decoding: PageText.trimmed(value[...]), as: UTF8.self).lowercased()
            guard trimmed.isEmpty || trimmed == "url" else { return false }
            urlEncoded = trimmed == "url"
        }
        if let truncated = fields[.isTruncated] {
            guard let value = checkedPlain(truncated) else { return false }
            switch String(decoding: PageText.trimmed(value[...]), as: UTF8.self) {
            case "true", "1": isTruncated = true
            case "false", "0": isTruncated = false
            default: return false
            }
        }
        if let token = fields[.nextContinuationToken] {
            guard let value = checkedPlain(token) else { return false }
            nextContinuationToken = String(decoding: value, as: UTF8.self)
        }
        if let token = fields[.continuationToken], checkedPlain(token) == nil { return false }
        for field in [Field.prefix, .delimiter, .startAfter] {
            guard let text = fields[field] else { continue }
            guard key(text, urlEncoded: urlEncoded) != nil else { return false }
            decoded.removeAll(keepingCapacity: true)
        }
        for folder in rawFolders {
            guard let range = key(folder, urlEncoded: urlEncoded) else { return false }
            folders.append(range)
        }
        files.reserveCapacity(rawObjects.count)
        for object in rawObjects {
            guard let keyText = object.key, let key = key(keyText, urlEncoded: urlEncoded) else { return false }
            var file = File(name: key)
            if let size = object.size {
                // The full reader takes a Size's text as it is (no UTF-8 check): digits or no size.
                file.size = size.hasReference ? PageText.size(plain(size)[...]) : PageText.size(bytes[size.range])
            }
            if let etag = object.etag {
                guard let range = utf8(etag) else { return false }
                var value = range
                if value.count >= 2, decoded[value.lowerBound] == UInt8(ascii: "\""),
                   decoded[value.upperBound - 1] == UInt8(ascii: "\"") {
                    value = (value.lowerBound + 1)..<(value.upperBound - 1)
                }
                file.etag = value.isEmpty ? nil : value
            }
            if let date = object.lastModified {
                guard let range = utf8(date) else { return false }
                file.modificationTime = range.isEmpty ? nil : RFC3339.parse(decoded[range])
            }
            // Named by what follows the listed prefix, by bytes; not under it, or the folder's own marker: left out.
            guard decoded[key].starts(with: prefix), key.count > prefix.count else { continue }
            file.name = (key.lowerBound + prefix.count)..<key.upperBound
            files.append(file)
        }
        return true
    }

    /// A field's text with its references decoded, appended to `decoded` and checked to be UTF-8: its range there.
    private mutating func utf8(_ text: Text) -> Range<Int>? {
        let start = decoded.count
        appendDecoded(text)
        guard PageText.isUTF8(decoded[start...]) else { return nil }
        return start..<decoded.count
    }

    /// A key-like field, form-decoded when the page is url-encoded (`+` a space, then `%XX`), in `decoded`.
    private mutating func key(_ text: Text, urlEncoded: Bool) -> Range<Int>? {
        guard urlEncoded else { return utf8(text) }
        scratch.removeAll(keepingCapacity: true)
        PageText.decode(bytes[text.range], hasReference: text.hasReference, into: &scratch)
        let start = decoded.count
        guard PageText.formDecode(scratch[...], into: &decoded) else { return nil }
        guard PageText.isUTF8(decoded[start...]) else { return nil }
        return start..<decoded.count
    }

    /// A field's text, references decoded, nil if it is not UTF-8 (the full reader's `value`).
    private func checkedPlain(_ text: Text) -> [UInt8]? {
        let value = plain(text)
        return PageText.isUTF8(value[...]) ? value : nil
    }

    /// A field's text with its references decoded, as bytes.
    private func plain(_ text: Text) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.range.count)
        PageText.decode(bytes[text.range], hasReference: text.hasReference, into: &out)
        return out
    }

    private mutating func appendDecoded(_ text: Text) {
        PageText.decode(bytes[text.range], hasReference: text.hasReference, into: &decoded)
    }
}
