// A file name as the kernel sees it: bytes. Swift's `String` compares and hashes by Unicode canonical
// equivalence, so `é` spelled NFC (`C3 A9`) equals `é` spelled NFD (`65 CC 81`), and a dictionary keyed by
// `String` files two different names of one directory under one key. A web server serves both spellings as two
// files with two contents (issue 35): keyed by `String`, the second became `é (2).txt`, and opening the NFC bytes
// returned the NFD file. `FileName` compares, hashes and orders by UTF-8 bytes; every key that is a name (the
// catalog's directories, a listing's duplicates) is one.

import Glibc

/// A name compared, hashed and ordered by its UTF-8 bytes, never by canonical equivalence.
package struct FileName: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name as text (for logs and replies); its UTF-8 bytes are what identify it.
    let string: String

    package init(_ string: String) {
        self.string = string
    }

    package init(stringLiteral string: String) {
        self.string = string
    }

    package var description: String { string }

    package static func == (lhs: FileName, rhs: FileName) -> Bool {
        lhs.string.utf8.count == rhs.string.utf8.count && order(lhs.string, rhs.string) == 0
    }

    package func hash(into hasher: inout Hasher) {
        // SAFETY: the buffer is the string's own contiguous UTF-8 (a native or small string's, which every name
        // is), alive for the closure and only read in it.
        if string.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) != nil {
            return
        }
        var text = string
        // SAFETY: as above, made contiguous first.
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Byte order: what `ls` shows in the C locale, and what UTF-8 gives as code point order.
    package static func < (lhs: FileName, rhs: FileName) -> Bool {
        order(lhs.string, rhs.string) < 0
    }

    /// Whether `lhs` and `rhs` are the same bytes: for the few places that compare names without a key.
    package static func same(_ lhs: String, _ rhs: String) -> Bool {
        FileName(lhs) == FileName(rhs)
    }

    /// The byte order of two names: negative, zero or positive, as memcmp(3). memcmp over the strings' own
    /// storage, not a walk of their UTF-8 views: sorting and indexing 100,000 names runs in the daemon's debug
    /// build too (the tests'), where a generic walk costs five times as much.
    private static func order(_ lhs: String, _ rhs: String) -> Int {
        // Read in place where the strings are contiguous (every name is): a copy of each to make it so cost two
        // retains and releases per comparison, a few million of them for a listing of a million names (issue 46).
        // SAFETY: both buffers are the strings' own contiguous UTF-8, alive for the closures; memcmp reads at most
        // the shorter one's count from each.
        let inPlace = lhs.utf8.withContiguousStorageIfAvailable { a in
            rhs.utf8.withContiguousStorageIfAvailable { b in compare(a, b) }
        }
        if let found = inPlace ?? nil { return found }
        var left = lhs, right = rhs
        // SAFETY: as above, made contiguous first.
        return left.withUTF8 { a in right.withUTF8 { b in compare(a, b) } }
    }

    /// memcmp(3) of two byte buffers, the shorter first where one starts the other: names' order as bytes.
    static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(a.count, b.count)
        let compared = common == 0 ? 0 : Int(memcmp(a.baseAddress!, b.baseAddress!, common))
        return compared != 0 ? compared : a.count - b.count
    }
}
