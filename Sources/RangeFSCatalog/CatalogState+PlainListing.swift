// A first listing added whole (PlainListing.swift): its files go straight into the compact table in listing order,
// which is their name order, so the directory's sorted children are the inodes as handed out and it needs no
// table of names until something changes in it (`unindexedNames`). What each file becomes is what
// `Catalog.addListed` makes of the same listing parsed: listed, not validated, its URL derived from the directory's.

extension CatalogState {
    /// Adds `listing`'s files to directory `parent`, which holds nothing yet and is known by `listingURL`'s
    /// directory URL; false (nothing added) for any other directory, which the caller lists by the rules.
    mutating func addPlain(_ listing: PlainListing, parent: UInt64, listingURL: String) -> Bool {
        guard childCount(of: parent) == 0, let base = directories[parent]?.url,
              DirectoryURL(listingURL)?.child(encodedSegment: "", isDirectory: false) == base else { return false }
        let baseIndex = files.baseIndex(of: base)
        files.reserve(through: nextInode + UInt64(listing.count))
        var sorted: [UInt64] = []
        sorted.reserveCapacity(listing.count)
        listing.forEach { file in
            let inode = nextInode
            nextInode += 1
            files.storeListed(inode: inode, name: file.name, parent: parent, baseIndex: baseIndex, size: file.size ?? 0,
                              etag: file.etag, listedTime: file.modificationTime, precision: file.precision,
                              attributesExact: file.size != nil && file.modificationTime != nil)
            totalBytes = totalBytes &+ (file.size ?? 0)
            sorted.append(inode)
        }
        names[parent] = nil
        unindexedNames.insert(parent)
        sortedChildren[parent] = sorted
        return true
    }
}
