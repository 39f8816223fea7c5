// What the catalog (Catalog.swift) hands out: a file with its remote metadata and what its listing said, a
// directory, or either of them as a node of the tree. Plain values: a copy never changes under its holder.
import RangeFSCache

/// One file in the mount.
public struct CatalogItem: Sendable, Equatable {
    package let inode: UInt64
    public let name: String
    public let metadata: RemoteMetadata
    /// The directory that holds it.
    package var parent: UInt64 = Catalog.rootInode
    /// It came from a directory listing (it is not saved on its own).
    package var listed = false
    /// A probe has seen it (size, date and validators are the server's); false for a listed file until then.
    package var validated = true
    /// For a listed file: whether the listing stated its size exactly and its date (to the minute at least), so
    /// that `ls -l` needs no probe.
    package var attributesExact = true
    /// For a listed file: the date its listing states (seconds since 1970). It is the date shown while a probe's
    /// date falls within the same minute, so that the date never changes because a probe brought the seconds
    /// (`rsync -a` would copy the file again).
    package var listedTime: Int64?
    /// How finely its listing states `listedTime` (ListedDate.swift).
    package var listedPrecision = ListedPrecision.minute

    package init(inode: UInt64, name: String, metadata: RemoteMetadata, parent: UInt64 = Catalog.rootInode,
                 listed: Bool = false, validated: Bool = true, attributesExact: Bool = true, listedTime: Int64? = nil,
                 listedPrecision: ListedPrecision = .minute) {
        self.inode = inode
        self.name = name
        self.metadata = metadata
        self.parent = parent
        self.listed = listed
        self.validated = validated
        self.attributesExact = attributesExact
        self.listedTime = listedTime
        self.listedPrecision = listedPrecision
    }

    /// The modification time to show: the listing's, unless a probe found the file changed since.
    package var shownModificationTime: Int64? {
        // Until a probe has seen it, its metadata holds the listing's date.
        if !validated, let listedTime { return listedTime }
        let probed = metadata.modificationTime
        guard let listedTime else { return probed }
        guard let probed else { return listedTime }
        return probed >= listedTime && probed - listedTime < 60 ? listedTime : probed
    }
}

/// One directory in the mount: the root, or a directory URL and its listed subdirectories.
public struct CatalogDirectory: Sendable, Equatable {
    public let inode: UInt64
    public let name: String
    package let parent: UInt64
    /// The listing's URL (ending in `/`); nil for a root that only holds files mounted one by one.
    public let url: String?
    /// Whether its listing has been read into the catalog.
    package var listed = false
    /// When its listing was last read or tried (monotonic seconds), for refreshing it: a refresh that failed
    /// sets it too, so that the next is tried only after the cache time.
    package var listedAt: Double?
    /// When what it shows was read from its server (monotonic seconds; the request's start), if known: never
    /// moved by a refresh that failed. What the listing states (an object store's ETags) was true then.
    package var readAt: Double?
    /// It was found in its parent's listing (a refresh of the parent may remove it).
    package var fromListing = false
    /// Seconds since 1970 from the listing, if it stated them.
    package var modificationTime: Int64?
}

/// A name in a directory.
public enum CatalogNode: Sendable, Equatable {
    case file(CatalogItem)
    case directory(CatalogDirectory)

    public var inode: UInt64 {
        switch self {
        case .file(let item): item.inode
        case .directory(let directory): directory.inode
        }
    }

    public var name: String {
        switch self {
        case .file(let item): item.name
        case .directory(let directory): directory.name
        }
    }
}

/// A child of a directory as a directory read takes it (`Catalog.directoryChildren`): a plain listed file in the
/// compact form its listing gave it, or any node whole.
package enum DirectoryChild: Equatable {
    case listed(UInt64, ListedAttributes)
    case node(CatalogNode)

    package var inode: UInt64 {
        switch self {
        case .listed(let inode, _): inode
        case .node(let node): node.inode
        }
    }

    package var name: String {
        switch self {
        case .listed(_, let listed): listed.name
        case .node(let node): node.name
        }
    }

    package var isDirectory: Bool {
        if case .node(.directory) = self { return true }
        return false
    }
}
