// A JSON listing (nginx, Caddy) read straight to records (ListingRecords.swift), issue 46. Parsed into entries, a
// 200,000-file nginx listing held its 19 MB of JSON, a `ListedEntry` per child (a name string each), a set of the
// names seen and the catalog's own table of names all at once: 517 bytes of RSS per entry at the peak, against a
// goal of 300. Read to records in one pass, the JSON can be let go before the catalog grows, and a first listing of
// plainly named files in name order (nginx sorts its listing by name, bytewise) is added whole, with no entry and no
// table of names (PlainListing.swift), as an object store's pages are. The records are also what is kept for an
// offline remount, which then reads no JSON.
//
// A record states what a JSON object states by the rules a listing reads it with (`ListingObject.child`), and
// records are gathered into entries by the same rules as JSON objects (DirectoryListing's EntryGatherer): the
// listing read through records is the listing read from the JSON (ListingJSONRecordsTests compares them over the
// fuzzer's inputs). What the fast reader cannot read (nested values) is not read to records: the caller parses the
// JSON as before.
import RangeFSSystem

extension ListingObject {
    /// The child this object states, as a listing reads it: its name, whether it is a folder (nginx: `"type":
    /// "directory"`; Caddy: `"is_dir": true`), a file's size when it is a whole number a file can have, its date
    /// (nginx's HTTP date in `mtime`, Caddy's RFC 3339 in `mod_time`) to the second, its ETag as given. Nil when it
    /// has no name (no child at all).
    var child: ListingRecords.Record? {
        guard let name = string(.name) else { return nil }
        let isDirectory = string(.type) == "directory" || boolean(.isDirectory) == true
        var child = ListingRecords.Record(name: name, isDirectory: isDirectory)
        if !isDirectory, let stated = number(.size), stated >= 0, stated < 0x1p63, stated.rounded() == stated {
            child.size = UInt64(stated)
        }
        if let date = string(.mtime) {
            child.modificationTime = HTTPDate.parse(date)  // nginx: "Mon, 23 Nov 2026 10:00:00 GMT"
        } else if let date = string(.modTime) {
            child.modificationTime = RFC3339.parse(date)  // Caddy: "2026-11-23T10:00:00.5Z"
        }
        child.datePrecision = .second
        child.etag = string(.etag)
        return child
    }
}

extension ListingJSON {
    /// The JSON listing `bytes` as records, one per object that names a child, in the listing's order; nil when
    /// the fast reader does not read `bytes` (not a JSON array of flat objects), or when the JSON would be judged
    /// no listing at all: when it does not read as text, or when no child of it would be shown (an empty listing
    /// is judged on its JSON: `DirectoryListing.problem(with:parsed:)` asks whether it is an array at all). Those
    /// are left as JSON, and read as before.
    package static func records(_ bytes: [UInt8]) -> [UInt8]? {
        guard DirectoryListing.isText(bytes) else { return nil }
        var writer = ListingRecords.Writer()
        var shows = false
        let read = forEachObject(bytes) { object in
            guard let child = object.child else { return }
            // A name the gatherer keeps (the first of two equal ones is kept too): the listing has a child.
            shows = shows || !DirectoryListing.holdsControlCharacter(child.name)
                && DirectoryListing.problem(withName: child.name) == nil
            writer.append(child)
        }
        guard read, shows else { return nil }
        var parts = [writer]
        return ListingRecords.joined(&parts)
    }
}
