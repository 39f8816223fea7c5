// The indexes of the mounted tree (Catalog.swift), kept under the catalog's one lock: files by inode, directories,
// each directory's names and their sorted order, the file of each URL, and the total size for `df`. Only
// `Catalog` holds one; its mutating helpers keep the indexes in step with each other.

/// The catalog's state: what `Catalog` reads and changes under its lock.
struct CatalogState {
    var nextInode: UInt64 = 2
    var files = InodeTable<CatalogItem>(first: 2)
    var directories: [UInt64: CatalogDirectory] = [
        Catalog.rootInode: CatalogDirectory(inode: Catalog.rootInode, name: "", parent: Catalog.rootInode, url: nil),
    ]
    /// Each directory's names and their inodes, keyed by bytes.
    var names: [UInt64: [FileName: UInt64]] = [Catalog.rootInode: [:]]
    /// Each directory's inodes sorted by name, kept until a name is added or removed: `readdir` of a large
    /// directory comes in many calls, and a lookup finds its place among its siblings by binary search.
    var sortedChildren: [UInt64: [UInt64]] = [:]
    /// The file of each URL, for revalidation, `rangefs add` and the saved set: O(1), not a walk of 100,000
    /// files. A URL that two files share (a list file naming it twice, a listing linking it from two folders)
    /// keeps its other files in `sharedURLs`.
    var fileOfURL: [String: UInt64] = [:]
    var sharedURLs: [String: [UInt64]] = [:]
    /// The sizes of all `files` added up, kept here where files come and go: `df` asks for it (statfs) and must
    /// not cost a walk of 100,000 files. Wrapping: absurd sizes summed give a wrong total, never a trap.
    var totalBytes: UInt64 = 0

    /// Puts `item` in `files`, indexed by its URL.
    mutating func store(_ item: CatalogItem) {
        let previous = files.updateValue(item, forKey: item.inode)
        totalBytes = totalBytes &+ item.metadata.size &- (previous?.metadata.size ?? 0)
        if let previous {
            if previous.metadata.url == item.metadata.url { return }
            unindex(previous)
        }
        let url = item.metadata.url
        if fileOfURL[url] == nil {
            fileOfURL[url] = item.inode
        } else {
            sharedURLs[url, default: []].append(item.inode)
        }
    }

    /// Takes file `inode` out of `files` and the URL index.
    mutating func removeFile(_ inode: UInt64) {
        guard let item = files.removeValue(forKey: inode) else { return }
        totalBytes = totalBytes &- item.metadata.size
        unindex(item)
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

    /// The files whose URL is `url`, first-added first.
    func files(of url: String) -> [CatalogItem] {
        guard let first = fileOfURL[url] else { return [] }
        return ([first] + (sharedURLs[url] ?? [])).compactMap { files[$0] }
    }

    func node(_ inode: UInt64) -> CatalogNode? {
        if let item = files[inode] { return .file(item) }
        return directories[inode].map { .directory($0) }
    }

    func name(of inode: UInt64) -> FileName {
        FileName(files[inode]?.name ?? directories[inode]?.name ?? "")
    }

    /// Takes `inode` (still in `files` or `directories`) out of `parent`'s names. Its place in the sorted
    /// children is found by binary search and removed there: dead links leave a 100,000-entry directory one
    /// by one, and sorting it again after each would make `ls` quadratic.
    mutating func unlist(_ inode: UInt64, named text: String, in parent: UInt64) {
        let name = FileName(text)
        if let sorted = sortedChildren[parent] {
            var low = 0, high = sorted.count
            while low < high {
                let middle = (low + high) / 2
                if self.name(of: sorted[middle]) < name { low = middle + 1 } else { high = middle }
            }
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
        let sorted = (names[parent] ?? [:]).sorted { $0.key < $1.key }.map(\.value)
        sortedChildren[parent] = sorted
        return sorted
    }

    mutating func uniqueName(_ preferred: String, in parent: UInt64) -> String {
        EntryNaming.unique(preferred) { names[parent]?[FileName($0)] != nil }
    }
}
