// The indexes of the mounted tree (Catalog.swift), kept under the catalog's one lock: files by inode, directories,
// each directory's names and their sorted order, the file of each URL, and the total size for `df`. Only
// `Catalog` holds one; its mutating helpers keep the indexes in step with each other.

/// The catalog's state: what `Catalog` reads and changes under its lock.
struct CatalogState {
    var nextInode: UInt64 = 2
    var files = FileTable()
    var directories: [UInt64: CatalogDirectory] = [
        Catalog.rootInode: CatalogDirectory(inode: Catalog.rootInode, name: "", parent: Catalog.rootInode, url: nil),
    ]
    /// Each directory's names and their inodes, keyed by bytes.
    var names: [UInt64: [FileName: UInt64]] = [Catalog.rootInode: [:]]
    /// Each directory's inodes sorted by name, kept until a name is added or removed: `readdir` of a large
    /// directory comes in many calls, and a lookup finds its place among its siblings by binary search.
    var sortedChildren: [UInt64: [UInt64]] = [:]
    /// Directories whose names are in `sortedChildren` only, with no table in `names`: a first listing added whole
    /// in name order (CatalogState+PlainListing.swift), whose million names hashed into a table cost a third of an
    /// offline remount. A name is found among them by binary search; the first change builds the table
    /// (`indexNames`), so that every change below works on `names` as before.
    var unindexedNames: Set<UInt64> = []
    /// The file of each URL, for revalidation, `rangefs add` and the saved set: O(1), not a walk of 100,000
    /// files. A URL that two files share (a list file naming it twice, a listing linking it from two folders)
    /// keeps its other files in `sharedURLs`.
    /// A listed file whose URL is its directory's plus its encoded name is not in it (FileTable.swift): it is
    /// found through `directoriesOfURL` and its name, and costs no copy of its URL.
    var fileOfURL: [String: UInt64] = [:]
    var sharedURLs: [String: [UInt64]] = [:]
    /// The directories of each directory URL (one, unless two sources name the same).
    var directoriesOfURL: [String: [UInt64]] = [:]
    /// The sizes of all `files` added up, kept here where files come and go: `df` asks for it (statfs) and must
    /// not cost a walk of 100,000 files. Wrapping: absurd sizes summed give a wrong total, never a trap.
    var totalBytes: UInt64 = 0

    /// Puts `item` in `files`, indexed by its URL unless that is derived from its directory's (FileTable.swift).
    mutating func store(_ item: CatalogItem) {
        let previous = files[item.inode]
        let wasIndexed = previous != nil && !files.derivesURL(item.inode)
        files.store(item, base: directories[item.parent]?.url)
        let indexed = !files.derivesURL(item.inode)
        totalBytes = totalBytes &+ item.metadata.size &- (previous?.metadata.size ?? 0)
        if let previous {
            if previous.metadata.url == item.metadata.url && wasIndexed == indexed { return }
            if wasIndexed { unindex(previous) }
        }
        guard indexed else { return }
        let url = item.metadata.url
        if fileOfURL[url] == nil {
            fileOfURL[url] = item.inode
        } else {
            sharedURLs[url, default: []].append(item.inode)
        }
    }

    /// Takes file `inode` out of `files` and the URL index.
    mutating func removeFile(_ inode: UInt64) {
        let indexed = !files.derivesURL(inode)
        guard let item = files.removeValue(forKey: inode) else { return }
        totalBytes = totalBytes &- item.metadata.size
        if indexed { unindex(item) }
    }

    private mutating func unindex(_ item: CatalogItem) {
        let url = item.metadata.url
        if fileOfURL[url] == item.inode {
            if var others = sharedURLs[url], !others.isEmpty {
                fileOfURL[url] = others.removeFirst()
                sharedURLs[url] = others.isEmpty ? nil : others
            } else {
                fileOfURL[url] = nil
            }
        } else if var others = sharedURLs[url] {
            others.removeAll { $0 == item.inode }
            sharedURLs[url] = others.isEmpty ? nil : others
        }
    }

    /// The files whose URL is `url`, first-added first: those in the URL index, and those whose URL is their
    /// directory's plus their name, found through the directory and the decoded name.
    func files(of url: String) -> [CatalogItem] {
        var inodes = fileOfURL[url].map { [$0] + (sharedURLs[url] ?? []) } ?? []
        if let slash = url.utf8.lastIndex(of: UInt8(ascii: "/")) {
            let segment = url[url.utf8.index(after: slash)...]
            if !segment.isEmpty, let name = StoredFile.decodedName(segment),
               let holders = directoriesOfURL[String(url[...slash])] {
                for directory in holders {
                    if let inode = child(named: FileName(name), in: directory), files.derivesURL(inode) {
                        inodes.append(inode)
                    }
                }
            }
        }
        return inodes.sorted().compactMap { files[$0] }.filter { $0.metadata.url.utf8.elementsEqual(url.utf8) }
    }

    /// Makes `directory` the one at its inode, keeping the index of directories by URL in step.
    mutating func setDirectory(_ directory: CatalogDirectory) {
        removeDirectory(directory.inode)
        directories[directory.inode] = directory
        if let url = directory.url { directoriesOfURL[url, default: []].append(directory.inode) }
    }

    /// Takes directory `inode` out of `directories` and the index by URL.
    mutating func removeDirectory(_ inode: UInt64) {
        guard let old = directories.removeValue(forKey: inode) else { return }
        if let url = old.url {
            directoriesOfURL[url]?.removeAll { $0 == inode }
            if directoriesOfURL[url]?.isEmpty == true { directoriesOfURL[url] = nil }
        }
    }

    func node(_ inode: UInt64) -> CatalogNode? {
        if let item = files[inode] { return .file(item) }
        return directories[inode].map { .directory($0) }
    }

    func name(of inode: UInt64) -> FileName {
        FileName(files.name(of: inode) ?? directories[inode]?.name ?? "")
    }

    /// Takes `inode` (still in `files` or `directories`) out of `parent`'s names. Its place in the sorted
    /// children is found by binary search and removed there: dead links leave a 100,000-entry directory one
    /// by one, and sorting it again after each would make `ls` quadratic.
    mutating func unlist(_ inode: UInt64, named text: String, in parent: UInt64) {
        let name = FileName(text)
        indexNames(of: parent)
        if let sorted = sortedChildren[parent] {
            let low = position(of: name, in: sorted)
            if low < sorted.count, sorted[low] == inode {
                sortedChildren[parent]!.remove(at: low)
            } else {
                sortedChildren[parent] = nil
            }
        }
        names[parent]?[name] = nil
    }

    /// The inodes of `parent`'s children sorted by name, sorted now if a change made that necessary.
    mutating func sorted(_ parent: UInt64) -> [UInt64] {
        if let sorted = sortedChildren[parent] { return sorted }
        // Put in the order they were added first: a listing's (an object store's and nginx's are sorted, with
        // folders first), which the sort by name then finds in a few runs. Taken in the dictionary's hash order,
        // a million names cost 20 million comparisons (9 s of a first `ls -l`).
        var children = (names[parent] ?? [:]).map { (name: $0.key, inode: $0.value) }
        children.sort { $0.inode < $1.inode }
        children.sort { $0.name < $1.name }
        let sorted = children.map(\.inode)
        sortedChildren[parent] = sorted
        return sorted
    }

    /// `preferred`, or a numbered name if `parent` holds it: for a name about to be added (its table of names is
    /// built first).
    mutating func uniqueName(_ preferred: String, in parent: UInt64) -> String {
        indexNames(of: parent)
        return EntryNaming.unique(preferred) { names[parent]?[FileName($0)] != nil }
    }

    /// What is named `name` in directory `parent`, if anything: from its table of names, or by binary search in its
    /// sorted children while it has none (`unindexedNames`).
    func child(named name: FileName, in parent: UInt64) -> UInt64? {
        guard unindexedNames.contains(parent) else { return names[parent]?[name] }
        let sorted = sortedChildren[parent] ?? []
        let found = position(of: name, in: sorted)
        return found < sorted.count && self.name(of: sorted[found]) == name ? sorted[found] : nil
    }

    /// How many names directory `parent` holds.
    func childCount(of parent: UInt64) -> Int {
        unindexedNames.contains(parent) ? sortedChildren[parent]?.count ?? 0 : names[parent]?.count ?? 0
    }

    /// The first place in `sorted` (inodes in name order) whose name is not below `name`: O(log n).
    func position(of name: FileName, in sorted: [UInt64]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if self.name(of: sorted[middle]) < name { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first place in `sorted` (inodes in name order) whose name is above `name`: where the names after it
    /// start. O(log n).
    func position(after name: FileName, in sorted: [UInt64]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if self.name(of: sorted[middle]) <= name { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Builds directory `parent`'s table of names from its sorted children if it has none (`unindexedNames`):
    /// before anything changes among its children.
    mutating func indexNames(of parent: UInt64) {
        guard unindexedNames.remove(parent) != nil else { return }
        let sorted = sortedChildren[parent] ?? []
        var table: [FileName: UInt64] = [:]
        table.reserveCapacity(sorted.count)
        for inode in sorted { table[name(of: inode)] = inode }
        names[parent] = table
    }
}
