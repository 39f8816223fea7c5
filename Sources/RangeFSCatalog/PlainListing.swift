// A first listing that needs none of a listing's rules: an object store's flat prefix of a million files, as its
// pages were gathered or as kept for an offline remount (issue 46: a million kept objects showed offline in 14.5 s,
// the goal is 5). Read as any listing, each record became a `ListedEntry` (a name, an ETag string, the directory's
// URL), went through a set of the names seen, and was hashed again into the directory's table of names: 3.4 s of
// the daemon's CPU before the mount returned.
//
// Most of that work finds nothing to do. When every record is a file, every name is one a file can have as it is
// (no rule of DirectoryListing or EntryNaming changes or skips it) and the names come in strictly increasing byte
// order (as an object store lists keys), no two can clash and the listing's order is the directory's order. Such a
// listing is checked in one pass over its bytes, no string made, and then added whole (CatalogState+PlainListing):
// its files straight into the compact table, the directory's sorted children in listing order, and no table of
// names until something changes in the directory. Any other listing is read by the rules as before.

/// A listing of records (ListingRecords.swift) that holds plainly named files only, in name order.
package struct PlainListing {
    /// One of its files: what its record states, as `DirectoryListing`'s rules would keep it.
    package struct File {
        let name: String
        let size: UInt64?
        let modificationTime: Int64?
        let precision: ListedPrecision
        /// Its ETag when the record states a strong, quoted one (the rule JSON listings follow too); else empty.
        let etag: StoredETag
    }

    private let bytes: [UInt8]
    /// How many files it holds.
    let count: Int

    /// `bytes` as such a listing, or nil when they are not one: not records, cut or damaged, holding a folder,
    /// a name a rule would change or skip, two names out of order (or the same twice), or more than `limit` files.
    package init?(records bytes: [UInt8], limit: Int = DirectoryListing.maximumEntries) {
        guard ListingRecords.isRecords(bytes) else { return nil }
        var count = 0
        var plain = true
        var previous: Range<Int>?
        // SAFETY: the buffer is the array's own storage, read only inside the closure; every range read is one the
        // records' reader checked to lie within it.
        let read = bytes.withUnsafeBufferPointer { buffer in
            ListingRecords.forEachFields(bytes) { fields in
                let name = Self.slice(buffer, fields.name)
                plain = !fields.isDirectory && count < limit && EntryNaming.isPlain(name)
                    && previous.map { FileName.compare(Self.slice(buffer, $0), name) < 0 } ?? true
                previous = fields.name
                count += 1
                return plain
            }
        }
        guard read, plain else { return nil }
        self.bytes = bytes
        self.count = count
    }

    /// The bytes of `buffer` in `range`, which lies within it.
    private static func slice(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
        // SAFETY: a view of part of `buffer`, alive as long as it is; `range` lies within it (checked on access).
        UnsafeBufferPointer(rebasing: buffer[range])
    }

    /// Hands each file to `visit`, in order.
    func forEach(_ visit: (File) -> Void) {
        // SAFETY: as in `init`.
        _ = bytes.withUnsafeBufferPointer { buffer in
            ListingRecords.forEachFields(bytes, checked: true) { fields in
                // Checked as UTF-8 in `init` (`EntryNaming.isPlain`): decoding repairs nothing.
                let name = String(decoding: Self.slice(buffer, fields.name), as: UTF8.self)
                var etag = StoredETag.text("")
                if let range = fields.etag, buffer[range].first == UInt8(ascii: "\"") {
                    etag = StoredETag(Self.slice(buffer, range))
                }
                visit(File(name: name, size: fields.size, modificationTime: fields.modificationTime,
                           precision: fields.secondPrecision ? .second : .minute, etag: etag))
                return true
            }
        }
    }
}
