// Folder Catalog/: the mounted names and inodes, directory listings' parsing, and the saved set of mounted URLs.
// It sits beside Cache/ and may use Cache/ and System/.
//
// The mounted files and directories: names, inode numbers and what each one points at. The root directory is
// inode 1; files and directories get inodes from 2 upward in the order they are added and keep them for the life
// of the mount. Names are unique within their directory, as bytes: two spellings of one name (NFC and NFD) are
// two names, keyed and sorted as `FileName` (FileName.swift).
//
// Most files are mounted one by one (URLs on the command line, in list files, or added at runtime) and live in
// the root. A directory URL adds a directory whose children come from its listing, on its first lookup or
// readdir: the files of a listing are `listed`, and until a probe has seen them (`validated`) their size and date
// are the listing's. The records it hands out are in CatalogNode.swift, its indexes in CatalogState.swift.

import RangeFSCache
import RangeFSSystem

/// The mounted tree, safe to use from any thread.
public final class Catalog: Sendable {
    public static let rootInode: UInt64 = 1

    private let state = LockedBox(CatalogState())

    public init() {}

    /// Whether file `inode` keeps a URL of its own (FileTable.swift): for tests of how the catalog stores files.
    func keepsURL(of inode: UInt64) -> Bool {
        state.withLock { !$0.files.derivesURL(inode) || $0.fileOfURL.values.contains(inode) }
    }

    /// Makes the root directory the listing of `url` (a directory URL that is the mount's only source), or with
    /// nil a plain folder again (its listing failed at mount).
    public func setRootURL(_ url: String?) {
        state.withLock { state in
            state.setDirectory(CatalogDirectory(inode: Self.rootInode, name: "", parent: Self.rootInode, url: url))
        }
    }

    /// Adds a file for `metadata` under a unique name derived from `explicitName` or the URL.
    @discardableResult
    public func add(_ metadata: RemoteMetadata, explicitName: String? = nil, parent: UInt64 = Catalog.rootInode,
                    listed: Bool = false, validated: Bool = true, attributesExact: Bool = true,
                    listedTime: Int64? = nil) -> CatalogItem {
        add(metadata, explicitName: explicitName, parent: parent, listed: listed, validated: validated,
            attributesExact: attributesExact, listedTime: listedTime, listedPrecision: .minute)
    }

    /// Adds a listed file (see `add`) whose listing states its date `listedTime` to `listedPrecision`.
    @discardableResult
    func add(_ metadata: RemoteMetadata, explicitName: String? = nil, parent: UInt64 = Catalog.rootInode,
             listed: Bool = false, validated: Bool = true, attributesExact: Bool = true,
             listedTime: Int64?, listedPrecision: ListedPrecision) -> CatalogItem {
        state.withLock { state in
            let preferred = EntryNaming.preferredName(explicit: explicitName, metadata: metadata)
            // A copy of its own: the name given shares its storage with the parsed listing it came from, and would
            // pin that listing's memory (its URLs, freed once it is applied) in holes that malloc cannot give back.
            let name = String(decoding: Array(state.uniqueName(preferred, in: parent).utf8), as: UTF8.self)
            var item = CatalogItem(inode: state.nextInode, name: name, metadata: metadata, parent: parent,
                                   listed: listed, validated: validated, attributesExact: attributesExact)
            item.listedTime = listedTime
            item.listedPrecision = listedPrecision
            state.nextInode += 1
            state.store(item)
            state.names[parent, default: [:]][FileName(name)] = item.inode
            state.sortedChildren[parent] = nil
            return item
        }
    }

    /// Adds the files of `entries`, new children of directory `parent` listed from `listingURL`, as `add` adds
    /// each (listed, not validated, exact when their size and date are stated) but under one lock; a file whose
    /// name and URL are what the listing gave is kept without its URL and date as text (FileTable.swift), which a
    /// million objects built and compared twice each.
    package func addListed(_ entries: [ListedEntry], parent: UInt64, listingURL: String) {
        guard !entries.isEmpty else { return }
        state.withLock { state in
            // Every child's URL is the listing's directory URL plus its encoded name (DirectoryListing): derived,
            // when that is the URL the directory is known by.
            let base = state.directories[parent]?.url
            let listed = DirectoryURL(listingURL).map { $0.child(encodedSegment: "", isDirectory: false) }
            let baseIndex = base.flatMap { listed == $0 ? state.files.baseIndex(of: $0) : nil }
            // The directory's names, out of the table of every directory's for the loop: each of a million
            // insertions reached them through it, and the base URL's index was looked up by its text per file.
            state.indexNames(of: parent)
            var names = state.names.removeValue(forKey: parent) ?? [:]
            names.reserveCapacity(names.count + entries.count)
            for entry in entries {
                let unique = EntryNaming.unique(EntryNaming.sanitize(entry.name)) { names[FileName($0)] != nil }
                // A copy of its own, as `add` makes (the parsed listing's memory is freed once applied).
                let name = String(decoding: Array(unique.utf8), as: UTF8.self)
                let inode = state.nextInode
                state.nextInode += 1
                let stated = entry.size != nil && entry.modificationTime != nil
                if let baseIndex, FileName.same(name, entry.name) {
                    state.files.storeListed(inode: inode, name: name, parent: parent, baseIndex: baseIndex,
                                            size: entry.size ?? 0, etag: StoredETag(entry.etag ?? ""),
                                            listedTime: entry.modificationTime, precision: entry.datePrecision,
                                            attributesExact: stated)
                    state.totalBytes = state.totalBytes &+ (entry.size ?? 0)
                } else {
                    let metadata = RemoteMetadata(url: entry.url, size: entry.size ?? 0, etag: entry.etag ?? "",
                                                  lastModified: entry.modificationTime.map(HTTPDate.format) ?? "")
                    var item = CatalogItem(inode: inode, name: name, metadata: metadata, parent: parent, listed: true,
                                           validated: false, attributesExact: stated)
                    item.listedTime = entry.modificationTime
                    item.listedPrecision = entry.datePrecision
                    state.store(item)
                }
                names[FileName(name)] = inode
            }
            state.names[parent] = names
            state.sortedChildren[parent] = nil
        }
    }

    /// Adds the files of `listing` to directory `parent`, listed from `listingURL`, as `addListed` adds a first
    /// listing's, when the directory holds nothing yet (CatalogState+PlainListing.swift); false if it holds some.
    package func addPlainListing(_ listing: PlainListing, parent: UInt64, listingURL: String) -> Bool {
        state.withLock { $0.addPlain(listing, parent: parent, listingURL: listingURL) }
    }

    /// Adds a directory for the listing at `url`, named `explicitName` or after the URL's last segment.
    @discardableResult
    public func addDirectory(url: String, explicitName: String? = nil, parent: UInt64 = Catalog.rootInode,
                             fromListing: Bool = false, modificationTime: Int64? = nil) -> CatalogDirectory {
        state.withLock { state in
            let preferred = EntryNaming.preferredName(
                explicit: explicitName,
                metadata: RemoteMetadata(url: String(url.dropLast(url.hasSuffix("/") ? 1 : 0)), size: 0, etag: "",
                                         lastModified: ""))
            let name = state.uniqueName(preferred, in: parent)
            var directory = CatalogDirectory(inode: state.nextInode, name: name, parent: parent, url: url)
            directory.modificationTime = modificationTime
            directory.fromListing = fromListing
            state.nextInode += 1
            state.setDirectory(directory)
            state.names[directory.inode] = [:]
            state.names[parent, default: [:]][FileName(name)] = directory.inode
            state.sortedChildren[parent] = nil
            return directory
        }
    }

    /// The folder `path` (components, from the root), made where missing: folders that a list file names
    /// (`movies/a.mp4=URL`), not directory URLs. A component already taken by a file gets a numbered name.
    public func folder(_ path: [String]) -> UInt64 {
        state.withLock { state in
            var parent = Self.rootInode
            for component in path {
                if let existing = state.child(named: FileName(component), in: parent),
                   state.directories[existing]?.url == nil, state.directories[existing] != nil {
                    parent = existing
                    continue
                }
                let name = state.uniqueName(EntryNaming.sanitize(component), in: parent)
                let folder = CatalogDirectory(inode: state.nextInode, name: name, parent: parent, url: nil)
                state.nextInode += 1
                state.setDirectory(folder)
                state.names[folder.inode] = [:]
                state.names[parent, default: [:]][FileName(name)] = folder.inode
                state.sortedChildren[parent] = nil
                parent = folder.inode
            }
            return parent
        }
    }

    /// Records that the listing of directory `inode` has been read or tried, at `time` (monotonic seconds), and
    /// when what it shows was read from its server (`readAt`; nil leaves it as it was).
    package func markListed(_ inode: UInt64, at time: Double, readAt: Double? = nil) {
        state.withLock { state in
            state.directories[inode]?.listed = true
            state.directories[inode]?.listedAt = time
            if let readAt { state.directories[inode]?.readAt = readAt }
        }
    }

    /// Gives listed file `inode` the cached version `stored` if it still shows `expected` and is not validated,
    /// as one step (a refresh of its directory may state another version meanwhile). Returns whether it did.
    package func adoptStoredVersion(_ stored: RemoteMetadata, inode: UInt64, expected: RemoteMetadata) -> Bool {
        state.withLock { state in
            guard let item = state.files[inode], !item.validated, item.metadata == expected else { return false }
            state.store(Self.validated(item, as: stored))
            return true
        }
    }

    /// Gives a listed file the size and date a newer listing states; a probe sees it again before it is read.
    package func updateListed(inode: UInt64, metadata: RemoteMetadata, listedTime: Int64?,
                      listedPrecision: ListedPrecision = .minute) {
        state.withLock { state in
            guard let item = state.files[inode] else { return }
            var updated = CatalogItem(inode: inode, name: item.name, metadata: metadata, parent: item.parent,
                                      listed: true, validated: false, attributesExact: true)
            updated.listedTime = listedTime
            updated.listedPrecision = listedPrecision
            state.store(updated)
        }
    }

    /// Removes a file or directory (with everything under it) from its parent: it left the server's listing.
    public func removeNode(_ inode: UInt64) {
        state.withLock { state in
            func remove(_ inode: UInt64) {
                if let item = state.files[inode] {
                    state.unlist(inode, named: item.name, in: item.parent)
                    state.removeFile(inode)
                } else if let directory = state.directories[inode] {
                    state.indexNames(of: inode)
                    for child in (state.names[inode] ?? [:]).values { remove(child) }
                    state.names[inode] = nil
                    state.sortedChildren[inode] = nil
                    state.unlist(inode, named: directory.name, in: directory.parent)
                    state.removeDirectory(inode)
                }
            }
            remove(inode)
        }
    }

    /// Replaces the metadata of a file whose remote content changed, or that a probe has now seen; its name and
    /// inode stay.
    package func update(inode: UInt64, metadata: RemoteMetadata) {
        state.withLock { state in
            guard let item = state.files[inode] else { return }
            state.store(Self.validated(item, as: metadata))
        }
    }

    /// `item` as a probe (or a cached version that agrees with its listing) shows it: `metadata`'s size, date and
    /// validators, exact; its listing's date kept.
    private static func validated(_ item: CatalogItem, as metadata: RemoteMetadata) -> CatalogItem {
        var validated = CatalogItem(inode: item.inode, name: item.name, metadata: metadata, parent: item.parent,
                                    listed: item.listed, validated: true, attributesExact: true)
        validated.listedTime = item.listedTime
        validated.listedPrecision = item.listedPrecision
        return validated
    }

    /// Removes the file at `path` (a name in the root, or `folder/name`); returns it, or nil if there is none.
    @discardableResult
    package func remove(named path: String) -> CatalogItem? {
        state.withLock { state in
            guard let inode = Self.resolve(path, in: state), let item = state.files[inode] else { return nil }
            state.unlist(inode, named: item.name, in: item.parent)
            state.removeFile(inode)
            return item
        }
    }

    /// The inode at `path` from the root (`a.mp4`, `movies/a.mp4`), if any.
    private static func resolve(_ path: String, in state: CatalogState) -> UInt64? {
        var current = rootInode
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let next = state.child(named: FileName(String(component)), in: current) else { return nil }
            current = next
        }
        return current == rootInode ? nil : current
    }

    package func item(inode: UInt64) -> CatalogItem? {
        state.withLock { $0.files[inode] }
    }

    /// The file mounted from `url` (the first one, if two files share it).
    package func item(url: String) -> CatalogItem? {
        state.withLock { $0.files(of: url).first }
    }

    /// Every file mounted from `url`.
    package func items(url: String) -> [CatalogItem] {
        state.withLock { $0.files(of: url) }
    }

    package func directory(inode: UInt64) -> CatalogDirectory? {
        state.withLock { $0.directories[inode] }
    }

    /// The file at `path` (a name in the root, or `folder/name`), if any.
    package func item(named path: String) -> CatalogItem? {
        state.withLock { state in Self.resolve(path, in: state).flatMap { state.files[$0] } }
    }

    /// What `name` is in directory `parent`, if anything.
    package func node(named name: String, in parent: UInt64) -> CatalogNode? {
        state.withLock { state in state.child(named: FileName(name), in: parent).flatMap(state.node) }
    }

    /// The URLs of the files among `names` in directory `parent`, in the order of `names`, under one lock: an
    /// open's digest check looks for four sums files beside each file it opens (issue 46).
    package func fileURLs(named names: [String], in parent: UInt64) -> [String] {
        state.withLock { state in
            names.compactMap { name in
                guard case .file(let item) = state.child(named: FileName(name), in: parent).flatMap(state.node)
                else { return nil }
                return item.metadata.url
            }
        }
    }

    /// The contents of directory `inode`, sorted by name.
    package func children(of inode: UInt64) -> [CatalogNode] {
        state.withLock { state in state.sorted(inode).compactMap(state.node) }
    }

    /// At most `count` children of directory `inode` from position `start` in name order, and how many it has:
    /// one `readdir` call's worth, without copying the whole directory.
    package func children(of inode: UInt64, from start: Int, count: Int) -> (nodes: [CatalogNode], total: Int) {
        state.withLock { state in
            let sorted = state.sorted(inode)
            guard start < sorted.count else { return ([], sorted.count) }
            return (sorted[start..<min(sorted.count, start + count)].compactMap(state.node), sorted.count)
        }
    }

    /// Up to `limit` files that follow `item` in its directory's name order and pass `wanted`, looking at most
    /// `scan` names past it: found by binary search, so a lookup costs O(log n), never a walk of the directory.
    package func siblings(after item: CatalogItem, limit: Int, scan: Int,
                         where wanted: (CatalogItem) -> Bool) -> [CatalogItem] {
        state.withLock { state in
            let sorted = state.sorted(item.parent)
            let low = state.position(after: FileName(item.name), in: sorted)
            var found: [CatalogItem] = []
            for inode in sorted[low..<min(sorted.count, low + scan)] {
                guard let sibling = state.files[inode], wanted(sibling) else { continue }
                found.append(sibling)
                if found.count == limit { break }
            }
            return found
        }
    }

    /// Whether `later` is one of the `count` names that follow `earlier` in their directory's order, by the same
    /// binary search as `siblings(after:limit:scan:)` but making no items: DirectoryPrefetch asks at every open,
    /// and making the `count` items it then threw away was most of its CPU (issue 48's small files).
    package func follows(_ later: CatalogItem, _ earlier: CatalogItem, within count: Int) -> Bool {
        guard later.parent == earlier.parent else { return false }
        return state.withLock { state in
            let sorted = state.sorted(earlier.parent)
            let low = state.position(after: FileName(earlier.name), in: sorted)
            return sorted[low..<min(sorted.count, low + count)].contains(later.inode)
        }
    }

    /// Up to `limit` subdirectories of directory `inode` in name order (after the name `after`, if given), looking
    /// at most `scan` names: the directories a walk ahead lists next (DirectoryService+WalkAhead.swift), found
    /// without copying a directory of 100,000 files.
    package func subdirectories(of inode: UInt64, after name: String? = nil, limit: Int, scan: Int) -> [CatalogDirectory] {
        state.withLock { state in
            let sorted = state.sorted(inode)
            let low = name.map { state.position(after: FileName($0), in: sorted) } ?? 0
            var found: [CatalogDirectory] = []
            for child in sorted[low..<min(sorted.count, low + scan)] {
                guard let directory = state.directories[child] else { continue }
                found.append(directory)
                if found.count == limit { break }
            }
            return found
        }
    }

    /// The inodes of directory `inode`'s children in name order.
    package func childInodes(of inode: UInt64) -> [UInt64] {
        state.withLock { $0.sorted(inode) }
    }

    /// The children `inodes` of a directory (from `childInodes`) as a directory read takes them, under one lock; nil
    /// for one that left the tree. With `compact`, a plain listed file comes as what its listing stated and is not
    /// rebuilt as an item: its URL, date and ETag made as text were a third of the daemon's work in an `ls -l` of a
    /// million listed objects (issue 46).
    package func directoryChildren(_ inodes: [UInt64], compact: Bool) -> [DirectoryChild?] {
        state.withLock { state in
            inodes.map { inode in
                if compact, let listed = state.files.listedAttributes(of: inode) { return .listed(inode, listed) }
                return state.node(inode).map(DirectoryChild.node)
            }
        }
    }

    /// The file or directory `inode`, if it is in the tree.
    func node(inode: UInt64) -> CatalogNode? {
        state.withLock { $0.node(inode) }
    }

    /// How many names directory `inode` holds.
    package func childCount(of inode: UInt64) -> Int {
        state.withLock { $0.childCount(of: inode) }
    }

    /// The path of a file or directory from the mount's root (`movies/a.mp4`).
    package func path(of inode: UInt64) -> String {
        state.withLock { state in
            var parts: [String] = []
            var current = inode
            while current != Self.rootInode {
                if let item = state.files[current] {
                    parts.append(item.name)
                    current = item.parent
                } else if let directory = state.directories[current] {
                    parts.append(directory.name)
                    current = directory.parent
                } else {
                    break
                }
            }
            return parts.reversed().joined(separator: "/")
        }
    }

    /// How many directories lie between `inode` and the root (0 for the root and what it holds directly).
    package func depth(of inode: UInt64) -> Int {
        path(of: inode).split(separator: "/").count
    }

    /// The directories whose listing has not been read yet (each has a URL), sorted by inode.
    package var unlistedDirectories: [CatalogDirectory] {
        state.withLock { state in state.directories.values.filter { $0.url != nil && !$0.listed } }
            .sorted { $0.inode < $1.inode }
    }

    /// How many files the mount holds, listed ones included, and their sizes added up: kept as files are added,
    /// updated and removed, so that statfs (every `df`) walks nothing.
    public var totals: (files: Int, bytes: UInt64) {
        state.withLock { ($0.files.count, $0.totalBytes) }
    }

    /// The files mounted one by one (not found by a listing), sorted by name: picked under the lock from their
    /// stored flags, so that the few of a tree of 1,000,000 listed files cost no copy and no sort of all of them.
    package var unlistedItems: [CatalogItem] {
        state.withLock { $0.files.unlisted }.sorted { FileName($0.name) < FileName($1.name) }
    }

    /// Every file, listed ones included, sorted by name.
    public var items: [CatalogItem] {
        state.withLock { Array($0.files.values) }.sorted { FileName($0.name) < FileName($1.name) }
    }

    /// The directories that were mounted as directory URLs (not those found in listings), and the root if it is one.
    public var directorySources: [CatalogDirectory] {
        state.withLock { state in
            state.directories.values.filter { directory in
                directory.url != nil
                    && (directory.inode == Self.rootInode || state.directories[directory.parent]?.url == nil)
            }
        }.sorted { $0.inode < $1.inode }
    }
}
