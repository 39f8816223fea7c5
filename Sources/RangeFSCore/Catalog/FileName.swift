// A file name as the kernel sees it: bytes. Swift's `String` compares and hashes by Unicode canonical
// equivalence, so `é` spelled NFC (`C3 A9`) equals `é` spelled NFD (`65 CC 81`), and a dictionary keyed by
// `String` files two different names of one directory under one key. A web server serves both spellings as two
// files with two contents (issue 35): keyed by `String`, the second became `é (2).txt`, and opening the NFC bytes
// returned the NFD file. `FileName` compares, hashes and orders by UTF-8 bytes; every key that is a name (the
// catalog's directories, a listing's duplicates) is one.

/// A name compared, hashed and ordered by its UTF-8 bytes, never by canonical equivalence.
public struct FileName: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name as text (for logs and replies); its UTF-8 bytes are what identify it.
    public let string: String

    public init(_ string: String) {
        self.string = string
    }

    public init(stringLiteral string: String) {
        self.string = string
    }

    public var description: String { string }

    public static func == (lhs: FileName, rhs: FileName) -> Bool {
        lhs.string.utf8.count == rhs.string.utf8.count && lhs.string.utf8.elementsEqual(rhs.string.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        let hashed = string.utf8.withContiguousStorageIfAvailable { bytes in
            // SAFETY: the buffer is the string's own storage, alive for the closure, and read only here.
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
        if hashed == nil {
            // The same bytes fed the same way, so that equal names hash alike whatever their storage.
            Array(string.utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
        }
        hasher.combine(string.utf8.count)
    }

    /// Byte order: what `ls` shows in the C locale, and what UTF-8 gives as code point order.
    public static func < (lhs: FileName, rhs: FileName) -> Bool {
        lhs.string.utf8.lexicographicallyPrecedes(rhs.string.utf8)
    }

    /// Whether `lhs` and `rhs` are the same bytes: for the few places that compare names without a key.
    public static func same(_ lhs: String, _ rhs: String) -> Bool {
        FileName(lhs) == FileName(rhs)
    }
}
