// What of a directory listing is kept in the cache (`listings/`). A page of links may link each file with a
// presigned URL (`f.bin?X-Amz-Signature=...&X-Amz-Credential=...`), and the listing is kept so that the tree
// shows while its server is down: kept whole, it would keep the signatures too, in a file no one thinks of as
// holding secrets. The catalog knows URLs by their identities (Redaction, URLQuery): the query keeps its names
// and loses its values. A kept HTML listing does the same to every query in its text. That changes no child:
// a link with a query is never a child (DirectoryURL.childSegment), and nginx's size and date columns hold no `?`.
// A JSON listing (nginx, Caddy) is kept as the records read from it (ListingJSON+Records.swift), or as it came when
// it is not read to records; those and an object store's records (ListingRecords.swift) keep their names as read:
// a `?` in a name is part of the name.
import RangeFSSystem

package enum ListingRedaction {
    /// `body` as it is kept: for an HTML listing, every `?query` in it with its values replaced by `***` (up to a
    /// quote, `<`, `>`, `#` or white space); a JSON listing or records unchanged.
    package static func kept(_ body: [UInt8]) -> [UInt8] {
        let first = body.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }
        guard first != UInt8(ascii: "["), !ListingRecords.isRecords(body), body.contains(UInt8(ascii: "?")) else {
            return body
        }
        var kept: [UInt8] = []
        kept.reserveCapacity(body.count)
        var index = 0
        while index < body.count {
            let byte = body[index]
            kept.append(byte)
            index += 1
            guard byte == UInt8(ascii: "?") else { continue }
            let end = body[index...].firstIndex(where: endsQuery) ?? body.count
            guard end > index else { continue }
            kept += Array(Redaction.hidingValues(Substring(String(decoding: body[index..<end], as: UTF8.self))).utf8)
            index = end
        }
        return kept
    }

    /// Whether `byte` ends a query written in HTML: a quote ends an attribute, `<` and `>` a tag, white space a
    /// bare attribute or text, `#` starts the fragment.
    private static func endsQuery(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">")
            || byte == UInt8(ascii: "#") || byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
