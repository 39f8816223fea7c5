// The mounted files: names, inode numbers and what each one points at. The root directory is inode 1; files get
// inodes from 2 upward in the order they are added and keep them for the life of the mount.

import Synchronization

/// One file in the mount.
public struct CatalogItem: Sendable, Equatable {
    public let inode: UInt64
    public let name: String
    public let metadata: RemoteMetadata
}

/// The set of mounted files, safe to use from any thread.
public final class Catalog: Sendable {
    public static let rootInode: UInt64 = 1

    private struct State {
        var nextInode: UInt64 = 2
        var byInode: [UInt64: CatalogItem] = [:]
        var byName: [String: UInt64] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// Adds a file for `metadata` under a unique name derived from `explicitName` or the URL.
    @discardableResult
    public func add(_ metadata: RemoteMetadata, explicitName: String? = nil) -> CatalogItem {
        state.withLock { state in
            let preferred = EntryNaming.preferredName(explicit: explicitName, metadata: metadata)
            let name = EntryNaming.unique(preferred) { state.byName[$0] != nil }
            let item = CatalogItem(inode: state.nextInode, name: name, metadata: metadata)
            state.nextInode += 1
            state.byInode[item.inode] = item
            state.byName[name] = item.inode
            return item
        }
    }

    /// Replaces the metadata of a file whose remote content changed; its name and inode stay.
    public func update(inode: UInt64, metadata: RemoteMetadata) {
        state.withLock { state in
            guard let item = state.byInode[inode] else { return }
            state.byInode[inode] = CatalogItem(inode: inode, name: item.name, metadata: metadata)
        }
    }

    /// Removes the file called `name`; returns it, or nil if there is none.
    @discardableResult
    public func remove(named name: String) -> CatalogItem? {
        state.withLock { state in
            guard let inode = state.byName.removeValue(forKey: name) else { return nil }
            return state.byInode.removeValue(forKey: inode)
        }
    }

    public func item(inode: UInt64) -> CatalogItem? {
        state.withLock { $0.byInode[inode] }
    }

    public func item(named name: String) -> CatalogItem? {
        state.withLock { state in state.byName[name].flatMap { state.byInode[$0] } }
    }

    /// Every file, sorted by name.
    public var items: [CatalogItem] {
        state.withLock { Array($0.byInode.values) }.sorted { $0.name < $1.name }
    }
}
