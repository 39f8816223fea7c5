// Reading a web server's directory listing (DESIGN.md §7): which of its links are the directory's children, with
// their names, and their sizes and dates where the listing states them exactly.
//
// JSON listings come from nginx (`autoindex_format json`) and Caddy (`file_server browse`, asked with
// `Accept: application/json`); both state exact sizes and dates. HTML listings (nginx autoindex, Apache
// mod_autoindex, lighttpd mod_dirlisting, python's http.server, or any page of links) are read for their
// `<a href>` links. Of an HTML listing only nginx's states exact sizes (`autoindex_exact_size`, its default);
// rounded sizes ("1.2M", "4.0K") are never taken. nginx's HTML dates are to the minute, in GMT (its default,
// `autoindex_localtime off`): with the exact size that is enough for `ls -l`, and the probe at open brings the
// validators. A file without an exact size and a date is probed on lookup.
//
// Only links that resolve to a direct child of the directory count: same scheme, host and port, and the
// directory's path plus one segment (a trailing `/` marks a subdirectory). Sort links (`?C=N;O=D`), fragments,
// the parent, other hosts, `mailto:` and `javascript:` are not children. A child's name is its percent-decoded
// segment; one that cannot name a file (it decodes to `..`, or holds `/` as `%2F`, or is not UTF-8, or is longer
// than a file name can be) is skipped with the reason, for the log. A name holding a control character (NUL,
// newline, tab, any other C0 byte, or DEL) is left out too, gathered apart so that a directory full of them costs
// one log line: such a name breaks `ls | while read`, `find | xargs` and every line-based tool.
//
// Names are bytes (FileName.swift): two spellings of `é.txt` (NFC `%C3%A9`, NFD `e%CC%81`) are two children,
// and a link's non-ASCII bytes are percent-encoded in its URL, so that no URL-keyed table can take one spelling
// for the other either.

import RangeFSPlatform

/// One child of a listed directory.
package struct ListedEntry: Sendable, Equatable {
    /// The file name in the mount: the percent-decoded last segment.
    package var name: String
    /// The child's absolute URL (a directory's ends in `/`): as a link wrote it, or, for a JSON listing's or
    /// records' child, its directory's URL plus its encoded name, made when asked. A million objects' listing held
    /// a URL string per child while it was applied, and most were never asked for.
    package var url: String {
        explicitURL ?? DirectoryListing.encodeSegment(name, after: directoryURL) + (isDirectory ? "/" : "")
    }
    private var explicitURL: String?
    /// The directory's URL (`prefix + path`), shared by its children, when the URL derives from the name.
    private var directoryURL = ""
    package var isDirectory: Bool
    /// The size in bytes, if the listing states it exactly.
    package var size: UInt64?
    /// Seconds since 1970, if the listing states the date (exactly, or to the minute in nginx's HTML).
    package var modificationTime: Int64?
    /// How finely `modificationTime` is stated: to the minute unless the listing states seconds.
    package var datePrecision = ListedPrecision.minute
    /// The ETag, quoted, if the listing states it (an object store's does).
    package var etag: String?

    init(name: String, url: String, isDirectory: Bool, size: UInt64? = nil, modificationTime: Int64? = nil,
         datePrecision: ListedPrecision = .minute) {
        self.name = name
        explicitURL = url
        self.isDirectory = isDirectory
        self.size = size
        self.modificationTime = modificationTime
        self.datePrecision = datePrecision
    }

    /// A child whose URL is `directoryURL` (the directory's, ending in `/`) plus its encoded name.
    init(name: String, in directoryURL: String, isDirectory: Bool) {
        self.name = name
        self.directoryURL = directoryURL
        self.isDirectory = isDirectory
    }

    package static func == (lhs: ListedEntry, rhs: ListedEntry) -> Bool {
        lhs.name == rhs.name && lhs.url == rhs.url && lhs.isDirectory == rhs.isDirectory && lhs.size == rhs.size
            && lhs.modificationTime == rhs.modificationTime && lhs.datePrecision == rhs.datePrecision
            && lhs.etag == rhs.etag
    }
}

/// What a listing held: its children, and the links that looked like children but were skipped, with why.
package struct ParsedListing: Sendable, Equatable {
    package var entries: [ListedEntry] = []
    package var skipped: [(link: String, reason: String)] = []
    /// The names left out because they hold a control character, as decoded (logged escaped, in one line).
    package var controlNames: [String] = []
    /// Set when the listing had more children than its limit (`DirectoryListing.maximumEntries`): the rest were
    /// dropped.
    package var truncated = false
    /// How many bytes of the page the reader looked at (one looked at twice counts twice): in proportion to the
    /// page's size, however its links are laid out (DirectoryListing+HTML.swift). Not part of `==`.
    var bytesExamined = 0

    package static func == (lhs: ParsedListing, rhs: ParsedListing) -> Bool {
        lhs.entries == rhs.entries && lhs.truncated == rhs.truncated && lhs.controlNames == rhs.controlNames
            && lhs.skipped.map(\.link) == rhs.skipped.map(\.link) && lhs.skipped.map(\.reason) == rhs.skipped.map(\.reason)
    }
}

package enum DirectoryListing {
    /// The most children one directory may have; the rest are dropped, with a log line and a line in `status`.
    package static let maximumEntries = 1_000_000

    /// Why `body`, which parsed as `listing`, is no directory listing; nil when it is one. Bytes that are not text
    /// (a file's content) never are, whatever links chance put in them: 2 MiB of random bytes hold `<a ` about
    /// half the time. Text is a listing when it gave children, or when it can be an empty one (`looksLikeListing`).
    /// A server's Content-Type is not asked: python's http.server calls anything it cannot name text/html, and
    /// a listing's own type varies (Caddy, nginx's JSON), so the bytes decide.
    package static func problem(with body: [UInt8], parsed listing: ParsedListing) -> String? {
        if ListingRecords.isRecords(body) {
            // Records that gave children were read whole (`parseRecords` takes all or nothing).
            guard listing.entries.isEmpty, !listing.truncated, isDamagedRecords(body) else { return nil }
            return "the listing's records (\(body.count) bytes) are cut or damaged; it is listed from its server again"
        }
        if !isText(body) {
            return "the answer is not a directory listing but binary data (\(body.count) bytes); check that the URL "
                + "names a directory whose server lists it (nginx autoindex, Apache Indexes), or mount it without "
                + "the trailing /"
        }
        if listing.entries.isEmpty && !looksLikeListing(body) {
            return "the answer is not a directory listing (no links to files or directories in it)"
        }
        return nil
    }

    /// Whether `body` reads as text: no NUL byte, and at most 1 in 100 bytes a control character other than
    /// tab, newline, form feed and carriage return, in its first 64 KiB (a file's bytes show there at once; no
    /// HTML or JSON listing holds a NUL).
    static func isText(_ body: [UInt8]) -> Bool {
        let sample = body.prefix(64 << 10)
        var controls = 0
        for byte in sample where byte < 0x20 || byte == 0x7F {
            if byte == 0 { return false }
            if byte != 0x09 && byte != 0x0A && byte != 0x0C && byte != 0x0D { controls += 1 }
        }
        return controls * 100 <= sample.count
    }

    /// Whether `body` can be a listing at all: a JSON array, a page with at least one link (an empty directory's
    /// page links its parent), or python's page of an empty folder. A file, a plain-text error or another page
    /// without links is not.
    static func looksLikeListing(_ body: [UInt8]) -> Bool {
        guard let first = body.first(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }) else {
            return false
        }
        // A JSON array (an empty one is nginx's and Caddy's empty folder); text that merely starts with `[`
        // (an INI file, a log) is not.
        if first == UInt8(ascii: "[") {
            if case .array = JSONValue.parse(body) { return true }
            return false
        }
        var index = 0
        while index + 2 < body.count {
            if body[index] == UInt8(ascii: "<"), body[index + 1] | 0x20 == UInt8(ascii: "a"),
               body[index + 2] == 0x20 || body[index + 2] == 0x0A || body[index + 2] == 0x09 {
                return true
            }
            index += 1
        }
        // python's http.server lists an empty folder with no link at all, under this title.
        let head = String(decoding: body.prefix(4096), as: UTF8.self)
        return head.contains("<title>Directory listing for /")
    }

    /// Whether `start`, the first bytes of a long answer, reads as the start of a listing: text, and a JSON array
    /// of objects (`[{`) or a page with a link. Enough to let a mount return before the rest has come and been
    /// read (issue 46); the whole is judged by `problem(with:parsed:)` when it has.
    package static func startsLikeListing(_ start: [UInt8]) -> Bool {
        guard isText(start) else { return false }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let first = start.firstIndex(where: { !blank($0) }) else { return false }
        if start[first] == UInt8(ascii: "[") {
            return start[(first + 1)...].first(where: { !blank($0) }) == UInt8(ascii: "{")
        }
        return start[first] == UInt8(ascii: "<") && looksLikeListing(start)
    }

    /// Reads the listing `body` of the directory `base` (an http(s) URL ending in `/`), keeping at most `limit`
    /// children. JSON when the body is a JSON array (whatever the server called it), else HTML.
    package static func parse(_ body: [UInt8], base: String, limit: Int = maximumEntries) -> ParsedListing {
        guard let directory = DirectoryURL(base) else { return ParsedListing() }
        if ListingRecords.isRecords(body) { return parseRecords(body, in: directory, limit: limit) ?? ParsedListing() }
        // Looked at as bytes: a million objects' listing was copied whole into a String to find its first one.
        let first = body.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }
        if first == UInt8(ascii: "["), let listing = parseJSON(body, in: directory, limit: limit) {
            return listing
        }
        // HTML: DirectoryListing+HTML.swift, on the bytes with what is not UTF-8 replaced.
        return parseHTML(Array(String(decoding: body, as: UTF8.self).utf8), in: directory, limit: limit)
    }

    /// Whether `body` is a listing of records (ListingRecords.swift) that is cut or damaged: the listing it was is
    /// not known, and what remains must not be taken for it.
    static func isDamagedRecords(_ body: [UInt8]) -> Bool {
        ListingRecords.isRecords(body) && !ListingRecords.forEach(body, { _ in })
    }

    // MARK: Records (object stores, kept listings)

    private static func parseRecords(_ body: [UInt8], in directory: DirectoryURL, limit: Int) -> ParsedListing? {
        var gatherer = EntryGatherer(directory: directory, limit: limit)
        // A million names grew the set of names seen and the entries twenty times over.
        let count = min(ListingRecords.statedCount(body), limit, body.count / 2)
        gatherer.seen.reserveCapacity(count)
        gatherer.listing.entries.reserveCapacity(count)
        let read = ListingRecords.forEach(body) { record in
            gatherer.take(record)
        }
        guard read else { return nil }
        gatherer.listing.bytesExamined = body.count
        return gatherer.listing
    }

    // MARK: JSON (nginx, Caddy)

    private static func parseJSON(_ body: [UInt8], in directory: DirectoryURL, limit: Int) -> ParsedListing? {
        var fast = EntryGatherer(directory: directory, limit: limit)
        // Both readers only ever move forward through the bytes (ListingJSON's index only grows; the decoder is
        // Foundation's), so the work is counted as one look at each byte per reader that read them.
        if ListingJSON.forEachObject(body, { fast.take($0) }) {
            fast.listing.bytesExamined = body.count
            return fast.listing
        }
        guard let items = decodedObjects(body) else { return nil }
        var decoded = EntryGatherer(directory: directory, limit: limit)
        for item in items { decoded.take(item) }
        decoded.listing.bytesExamined = 2 * body.count
        return decoded.listing
    }

    /// The entries of a JSON listing or of records, gathered one child at a time by the same rules.
    private struct EntryGatherer {
        /// The directory's URL, which its children's derive from (one string, shared by them all).
        let directoryURL: String
        let limit: Int
        var listing = ParsedListing()
        var seen = Set<FileName>()

        init(directory: DirectoryURL, limit: Int) {
            directoryURL = directory.child(encodedSegment: "", isDirectory: false)
            self.limit = limit
        }

        /// One object of a JSON listing.
        mutating func take(_ item: ListingObject) {
            guard !listing.truncated, let child = item.child else { return }
            take(child)
        }

        /// One child as a record (or a JSON object read to one) states it.
        mutating func take(_ child: ListingRecords.Record) {
            take(name: child.name, isDirectory: child.isDirectory, size: child.size,
                 modificationTime: child.modificationTime, precision: child.datePrecision, etag: child.etag)
        }

        /// One child, as a JSON object or a record states it.
        mutating func take(name: String, isDirectory: Bool, size: UInt64?, modificationTime: Int64?,
                           precision: ListedPrecision, etag: String?) {
            guard !listing.truncated else { return }
            if holdsControlCharacter(name) {
                listing.controlNames.append(name)
                return
            }
            if let problem = problem(withName: name) {
                listing.skipped.append((name, problem))
                return
            }
            guard seen.insert(FileName(name)).inserted else {
                // An object store's key that is also a prefix (`a` beside `a/b`): the folder, listed first, is shown.
                if !isDirectory { listing.skipped.append((name, "a folder of the same name is shown instead")) }
                return
            }
            guard listing.entries.count < limit else {
                listing.truncated = true
                return
            }
            var entry = ListedEntry(name: name, in: directoryURL, isDirectory: isDirectory)
            if !isDirectory { entry.size = size }
            // By its first byte: `hasPrefix` compares characters, and a quote followed by a combining mark is
            // another character (found by the ListingRecords fuzzer: a listing added whole kept such an ETag).
            entry.etag = etag.flatMap { $0.utf8.first == UInt8(ascii: "\"") ? $0 : nil }
            entry.datePrecision = precision
            entry.modificationTime = modificationTime
            listing.entries.append(entry)
        }
    }

    /// The objects of a JSON array read by the JSON decoder, for what `ListingJSON` does not read (nested values).
    private static func decodedObjects(_ body: [UInt8]) -> [ListingObject]? {
        // Not a JSON array of objects: not this kind of listing, and the caller tries the next kind.
        guard case .array(let values) = JSONValue.parse(body) else { return nil }
        var objects: [ListingObject] = []
        for value in values {
            guard case .object(let item) = value else { return nil }
            var object = ListingObject()
            for (key, value) in item {
                guard let field = ListingObject.Field.named(Array(key.utf8)[...]) else { continue }
                switch value {
                case .string(let text): object[field] = .string(text)
                case .boolean(let flag): object[field] = .boolean(flag)  // Caddy's is_dir
                case .number(let number): object[field] = .number(number)
                case .null, .array, .object: break
                }
            }
            objects.append(object)
        }
        return objects
    }

    /// Why `name`, from a listing, cannot name a file in the mount; nil if it can.
    package static func problem(withName name: String) -> String? {
        if name.isEmpty { return "its name is empty" }
        // Bytes, not Characters: `/` followed by a combining mark is one Character that is not "/" (found by the
        // ListingJSON fuzzer).
        if name.utf8.elementsEqual(".".utf8) || name.utf8.elementsEqual("..".utf8) {
            return "'\(name)' names a directory, not a child"
        }
        if name.utf8.contains(UInt8(ascii: "/")) { return "its name holds '/' (%2F)" }
        if name.utf8.contains(0) { return "its name holds a NUL byte" }
        if name.utf8.count > EntryNaming.maximumLength {
            return "its name is \(name.utf8.count) bytes, more than a file name can hold (255)"
        }
        return nil
    }

    /// Whether `name` holds a C0 control character (NUL, tab, newline, ...) or DEL.
    package static func holdsControlCharacter(_ name: String) -> Bool {
        name.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// `name` for a log line: control characters written as `\n`, `\t` or `\xNN`, so that one name is one line.
    package static func escapedForLog(_ name: String) -> String {
        var shown = ""
        for scalar in name.unicodeScalars {
            switch scalar.value {
            case 0x0A: shown += "\\n"
            case 0x09: shown += "\\t"
            case 0x0D: shown += "\\r"
            case 0..<0x20, 0x7F: shown += cFormat("\\x%02X", scalar.value)
            default: shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// `segment` (percent-encoded as a link wrote it) with its non-ASCII bytes percent-encoded too: one spelling
    /// per URL, whose `String` comparison is then byte for byte.
    static func encodeNonASCII(_ segment: String) -> String {
        guard segment.utf8.contains(where: { $0 >= 0x80 }) else { return segment }
        var encoded = ""
        for byte in segment.utf8 {
            if byte < 0x80 {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += cFormat("%%%02X", byte)
            }
        }
        return encoded
    }

    /// `name` percent-encoded as one path segment, after `base` (PercentEncoding.swift).
    package static func encodeSegment(_ name: String, after base: String = "") -> String {
        PercentEncoding.segment(name, after: base)
    }

    /// `text` with the HTML character references a link may hold decoded: `&amp;` `&lt;` `&gt;` `&quot;` `&#39;`
    /// `&apos;`, and numeric ones.
    static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var result = ""
        var rest = Substring(text)
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            rest = rest[ampersand...]
            guard let semicolon = rest.prefix(12).firstIndex(of: ";") else {
                result.append("&")
                rest = rest.dropFirst()
                continue
            }
            let entity = rest[rest.index(after: rest.startIndex)..<semicolon]
            let named = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"]
            var decoded: String?
            if let value = named[String(entity)] {
                decoded = value
            } else if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                decoded = UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String($0) }
            } else if entity.hasPrefix("#") {
                decoded = UInt32(entity.dropFirst()).flatMap(Unicode.Scalar.init).map { String($0) }
            }
            if let decoded {
                result += decoded
                rest = rest[rest.index(after: semicolon)...]
            } else {
                result.append("&")
                rest = rest.dropFirst()
            }
        }
        return result + rest
    }
}
