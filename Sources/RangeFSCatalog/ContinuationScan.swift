// A ListObjectsV2 page's NextContinuationToken, found while the page is still arriving (issue 46). A listing of a
// million objects is 1,000 pages asked one after the other: asked only once a page was read whole and parsed, the
// server's time and the parse's added up. The token is what the next request needs, and AWS writes it before the
// keys, so the next page can be asked as soon as its element has come, and the store makes it while this one is
// read.
//
// What this finds is a guess, never the listing: the page is still read whole by ObjectListingXML, and the guess is
// used only when the parse gives the same token (ObjectListing.swift); otherwise the page asked on it is dropped and
// the right one asked. So the scan stays simple: the first `<NextContinuationToken>` in the bytes, its text up to
// the closing tag. A token holding `&` (an entity, which the parse would decode) or `<` (markup) is no guess. In a
// well-formed page a tag cannot sit inside text (`<` is escaped there); a comment or CDATA holding one only makes a
// wrong guess, which costs one request.

/// Looks for a page's NextContinuationToken in its bytes as they come, each byte searched once.
package struct ContinuationScan {
    private static let open = Array("<NextContinuationToken>".utf8)
    private static let close = Array("</NextContinuationToken>".utf8)
    /// The longest token taken as a guess: AWS's are about 70 bytes; a longer text is left to the parse.
    static let longestToken = 4096

    /// Where the search goes on: the bytes before it hold no start of the tag searched for.
    private var searched = 0
    /// Where the token's text starts, once its opening tag was found.
    private var textStart: Int?
    /// Whether the scan has ended: a token found, or a text that is no guess.
    package private(set) var isDone = false

    package init() {}

    /// The token, the first time `body` (the page so far; each call with more of it) holds its element whole;
    /// nil before, and after it was given or given up.
    package mutating func token(in body: [UInt8]) -> String? {
        guard !isDone else { return nil }
        if textStart == nil {
            guard let at = Self.find(Self.open, in: body, from: searched) else {
                searched = max(searched, body.count - Self.open.count + 1)
                return nil
            }
            textStart = at + Self.open.count
            searched = at + Self.open.count
        }
        guard let start = textStart else { return nil }
        guard let end = Self.find(Self.close, in: body, from: searched) else {
            searched = max(searched, body.count - Self.close.count + 1)
            if body.count - start > Self.longestToken { isDone = true }
            return nil
        }
        isDone = true
        let text = body[start..<end]
        guard !text.isEmpty, text.count <= Self.longestToken,
              !text.contains(UInt8(ascii: "&")), !text.contains(UInt8(ascii: "<")) else { return nil }
        return String(validating: text, as: UTF8.self)
    }

    /// The index of the first `pattern` in `body` at or after `from`.
    private static func find(_ pattern: [UInt8], in body: [UInt8], from: Int) -> Int? {
        guard let first = pattern.first, body.count >= pattern.count else { return nil }
        var index = max(0, from)
        let last = body.count - pattern.count
        while index <= last {
            if body[index] == first {
                var matched = 1
                while matched < pattern.count, body[index + matched] == pattern[matched] { matched += 1 }
                if matched == pattern.count { return index }
            }
            index += 1
        }
        return nil
    }
}
