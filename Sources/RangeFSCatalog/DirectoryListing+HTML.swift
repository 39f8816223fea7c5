// Reading an HTML listing (nginx, Apache, lighttpd, python's http.server, any page of links) for its `<a href>`
// links, in time proportional to the page's size however its links are laid out (issue 45).
//
// Minified pages put every link on one line. The reader once took each link's nginx size and date from the rest of
// its line, copying that rest as a String: a page of n links on one line cost n times its size (2,500 links 47 s,
// 20 MB over 4 minutes at full CPU, with the mount waiting). Now every scan stops where the next one starts: the
// size and date after a link are read up to the end of the line or the next tag, whichever comes first, and the
// next link is looked for from there, so each byte is looked at a bounded number of times.
//
// Every byte the reader looks at goes through `PageReader`, which counts them (`ParsedListing.bytesExamined`), so
// tests and the ListingHTML fuzzer check that bound by counting, not by timing a loaded machine. (The fields of
// nginx's size and date are read in place up to three times after their line is found, and counted once, as the
// copy of them as text was: a bounded number either way.)

import RangeFSCache
import RangeFSPlatform
import RangeFSSystem

extension DirectoryListing {
    /// At most how many times the HTML reader looks at each byte of a page (plus `examinedSlack`): the bound the
    /// tests and the fuzzer hold it to. The reader's scans overlap only at their edges; 16 leaves room.
    static let examinedPerByte = 16
    static let examinedSlack = 256

    static func parseHTML(_ bytes: [UInt8], in directory: DirectoryURL, limit: Int) -> ParsedListing {
        var listing = ParsedListing()
        var seenURLs = Set<String>()
        var page = PageReader(bytes)
        var index = 0
        while let anchor = page.nextAnchor(from: index) {
            index = anchor.end
            guard let href = anchor.href else { continue }
            let link = decodeEntities(href)
            let child: (segment: String, isDirectory: Bool)
            switch directory.childSegment(of: link) {
            case .child(let segment, let isDirectory): child = (segment, isDirectory)
            case .notAChild: continue
            case .rejected(let reason):
                listing.skipped.append((link, reason))
                continue
            }
            let url = directory.child(encodedSegment: encodeNonASCII(child.segment), isDirectory: child.isDirectory)
            // An icon and a name often link to the same file.
            guard seenURLs.insert(url).inserted else { continue }
            guard let name = String(validating: PercentEncoding.bytes(child.segment), as: UTF8.self) else {
                listing.skipped.append((link, "its name is not UTF-8"))
                continue
            }
            if holdsControlCharacter(name) {
                listing.controlNames.append(name)
                continue
            }
            if let problem = problem(withName: name) {
                listing.skipped.append((link, problem))
                continue
            }
            guard listing.entries.count < limit else {
                listing.truncated = true
                break
            }
            var entry = ListedEntry(name: name, url: url, isDirectory: child.isDirectory)
            if !child.isDirectory, let (size, date) = page.nginxSizeAndDate(after: anchor.end) {
                entry.size = size
                entry.modificationTime = date
            }
            listing.entries.append(entry)
        }
        listing.bytesExamined = page.examined
        return listing
    }
}

/// A page's bytes, read forward, with a count of every byte looked at.
private struct PageReader {
    private let bytes: [UInt8]
    /// How many bytes were looked at so far (a byte looked at twice counts twice).
    private(set) var examined = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var count: Int { bytes.count }

    subscript(index: Int) -> UInt8 {
        mutating get {
            examined += 1
            return bytes[index]
        }
    }

    /// The bytes of `range` as text (every one of them looked at).
    mutating func text(_ range: Range<Int>) -> String {
        examined += range.count
        return String(decoding: bytes[range], as: UTF8.self)
    }

    /// Whether `byte` may follow `<a` in a link's opening tag.
    private static func separates(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
            || byte == UInt8(ascii: "\r")
    }

    /// The next `<a ...>` tag at or after `start`: its `href` value (if any) and where the tag's `</a>` ends.
    mutating func nextAnchor(from start: Int) -> (href: String?, end: Int)? {
        var index = start
        while index + 2 < count {
            guard self[index] == UInt8(ascii: "<"), self[index + 1] | 0x20 == UInt8(ascii: "a"),
                  Self.separates(self[index + 2])
            else {
                index += 1
                continue
            }
            var tagEnd = index + 3
            while tagEnd < count, self[tagEnd] != UInt8(ascii: ">") { tagEnd += 1 }
            guard tagEnd < count else { return nil }
            let href = attribute("href", in: (index + 2)..<tagEnd)
            // Past the link's text to its `</a>`, so that what follows (nginx's size column) can be read.
            var end = tagEnd + 1
            while end + 3 < count {
                if self[end] == UInt8(ascii: "<") {
                    if self[end + 1] == UInt8(ascii: "/"), self[end + 2] | 0x20 == UInt8(ascii: "a"),
                       self[end + 3] == UInt8(ascii: ">") {
                        end += 4
                        break
                    }
                    // An unclosed link: the next one starts here.
                    if self[end + 1] | 0x20 == UInt8(ascii: "a"), self[end + 2] == UInt8(ascii: " ") { break }
                }
                end += 1
            }
            return (href, min(end, count))
        }
        return nil
    }

    /// The value of attribute `name` in the tag's bytes `tag`: quoted with `"` or `'`, or bare.
    private mutating func attribute(_ name: String, in tag: Range<Int>) -> String? {
        let key = Array(name.utf8)
        var index = tag.lowerBound
        while index + key.count < tag.upperBound {
            var matches = true
            for offset in key.indices where self[index + offset] | 0x20 != key[offset] {
                matches = false
                break
            }
            guard matches, index == tag.lowerBound || Self.separates(self[index - 1]) else {
                index += 1
                continue
            }
            var cursor = index + key.count
            while cursor < tag.upperBound, self[cursor] == UInt8(ascii: " ") { cursor += 1 }
            guard cursor < tag.upperBound, self[cursor] == UInt8(ascii: "=") else {
                index += 1
                continue
            }
            cursor += 1
            while cursor < tag.upperBound, self[cursor] == UInt8(ascii: " ") { cursor += 1 }
            guard cursor < tag.upperBound else { return nil }
            let quote = self[cursor]
            var valueEnd = cursor + 1
            if quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") {
                while valueEnd < tag.upperBound, self[valueEnd] != quote { valueEnd += 1 }
                return text((cursor + 1)..<valueEnd)
            }
            while valueEnd < tag.upperBound, self[valueEnd] != UInt8(ascii: " "), self[valueEnd] != UInt8(ascii: "\t") {
                valueEnd += 1
            }
            return text(cursor..<valueEnd)
        }
        return nil
    }

    /// The size and date nginx's HTML autoindex writes after a file's link, when the size is exact: the rest of
    /// the line is `  23-Nov-2026 10:00    1048576` (the date in GMT, to the minute). Anything else (a rounded
    /// "1M", another server's columns, a tag) gives nothing. Read up to the end of the line or the next `<`,
    /// whichever comes first: a `<` cannot be part of these fields, and where the links share one line, the rest of
    /// the line is every other link of the page.
    mutating func nginxSizeAndDate(after index: Int) -> (UInt64, Int64)? {
        var lineEnd = index
        while lineEnd < count, self[lineEnd] != UInt8(ascii: "\n") {
            if self[lineEnd] == UInt8(ascii: "<") { return nil }
            lineEnd += 1
        }
        // The fields are read once more, as when they were copied out as text.
        examined += lineEnd - index
        // SAFETY: the page's own bytes, alive for the closure and only read in it, within `index..<lineEnd`.
        return bytes.withUnsafeBufferPointer { Self.sizeAndDate(in: $0, index..<lineEnd) }
    }

    private static let months = Array("JanFebMarAprMayJunJulAugSepOctNovDec".utf8)

    /// nginx's `DD-Mon-YYYY HH:MM SIZE` in `range` of `line`, read on its bytes, as a split of its text on white
    /// space, then on `-` and `:` (empty pieces left out), read it. That split's grapheme breaking and Unicode
    /// properties cost 3% of the daemon's instructions in a cold read of 3,000 small files (237,000 `isWhitespace`
    /// calls). The fields are cut at ASCII white space only: white space beyond ASCII, or a combining mark on a
    /// space, which the split by Character also cut at, now stays inside a field, which is then no date or number,
    /// and the link gets no size, as a rounded size gets none (its open asks the server).
    private static func sizeAndDate(in line: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> (UInt64, Int64)? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        guard let fields = pieces(of: line, in: range, count: 3, separatedBy: isSpace),
              let date = pieces(of: line, in: fields[0], count: 3, separatedBy: { $0 == UInt8(ascii: "-") }),
              let clock = pieces(of: line, in: fields[1], count: 2, separatedBy: { $0 == UInt8(ascii: ":") }),
              let day = line.decimalNumber(in: date[0]), (1...31).contains(day),
              let month = month(in: line, date[1]),
              let year = line.decimalNumber(in: date[2]), year <= 9999,
              let hour = line.decimalNumber(in: clock[0]), hour < 24,
              let minute = line.decimalNumber(in: clock[1]), minute < 60,
              let size = line.decimalNumber(in: fields[2]), size <= RemoteMetadata.largestSize
        else { return nil }
        let time = HTTPDate.daysSinceEpoch(year: Int(year), month: month, day: Int(day)) * 86_400
            + Int64(hour * 3600 + minute * 60)
        return (size, time)
    }

    /// The non-empty runs of `range` between bytes that `isSeparator` takes, if there are exactly `count` (at most
    /// 3) of them; nil otherwise.
    private static func pieces(of line: UnsafeBufferPointer<UInt8>, in range: Range<Int>, count: Int,
                               separatedBy isSeparator: (UInt8) -> Bool) -> [Range<Int>]? {
        var found: [Range<Int>] = []
        found.reserveCapacity(count)
        var index = range.lowerBound
        while index < range.upperBound {
            guard !isSeparator(line[index]) else {
                index += 1
                continue
            }
            let start = index
            while index < range.upperBound, !isSeparator(line[index]) { index += 1 }
            guard found.count < count else { return nil }
            found.append(start..<index)
        }
        return found.count == count ? found : nil
    }

    /// The month (1-12) named by exactly the three bytes `range` of `line`, in English, as nginx writes it.
    private static func month(in line: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        guard range.count == 3 else { return nil }
        for month in 0..<12 where (0..<3).allSatisfy({ line[range.lowerBound + $0] == months[month * 3 + $0] }) {
            return month + 1
        }
        return nil
    }
}
