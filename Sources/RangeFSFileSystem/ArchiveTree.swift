// One archive's members as the mount shows them: a tree of folders under the archive's own folder, with an inode
// per member. The index (Archives/) lists members by path, parents first; this turns that list into what lookup
// and readdir need, once, when the index is ready. Immutable afterwards, so every thread reads it without a lock.
//
// Inodes: a member's inode is `ArchiveTree.inode(slot:member:)`, bit 62 set, the archive's slot in bits 32..61 and
// the member's position + 1 below. The catalog hands out inodes counting up from 2, which never reach bit 62, so the
// two ranges cannot meet, and a member's inode needs no table to find its archive.
import RangeFSArchives
import RangeFSCatalog

/// The members of one indexed archive, by folder.
final class ArchiveTree: Sendable {
    /// Set in every member's inode.
    static let memberBit: UInt64 = 1 << 62

    let index: ArchiveIndex
    /// Which slot of `ArchiveFolders` the tree's inodes carry.
    let slot: UInt32
    /// Each folder's children in name order: folder 0 is the archive's own folder, folder `i + 1` member `i`.
    let children: [[Int]]
    /// Each folder's children by name (as bytes, FileName.swift).
    let names: [[FileName: Int]]
    /// Each member's folder (0: the archive's own, else member position + 1).
    let parents: [Int]

    init(index: ArchiveIndex, slot: UInt32) {
        let index = Self.withoutEscapingLinks(index)
        self.index = index
        self.slot = slot
        var positions: [FileName: Int] = [:]
        positions.reserveCapacity(index.members.count)
        var children = [[Int]](repeating: [], count: index.members.count + 1)
        var parents = [Int](repeating: 0, count: index.members.count)
        for (position, member) in index.members.enumerated() {
            // The builder made a folder for every parent before its children (ArchiveIndexBuilder).
            let parent = member.path.count > 1 ? (positions[Self.key(member.path.dropLast())].map { $0 + 1 } ?? 0) : 0
            parents[position] = parent
            children[parent].append(position)
            positions[Self.key(member.path[...])] = position
        }
        var names = [[FileName: Int]](repeating: [:], count: children.count)
        for folder in children.indices {
            children[folder].sort { FileName(index.members[$0].path.last!) < FileName(index.members[$1].path.last!) }
            for child in children[folder] { names[folder][FileName(index.members[child].path.last!)] = child }
        }
        self.children = children
        self.names = names
        self.parents = parents
    }

    /// `index` without the symlinks whose target leaves the archive's folder (absolute, or `..` past its top): the
    /// kernel would follow them out of the archive, onto the reader's own files. Members without a path go too.
    static func withoutEscapingLinks(_ index: ArchiveIndex) -> ArchiveIndex {
        var kept = index
        kept.members.removeAll { member in
            // A member without a name cannot be shown (a reader never makes one; a kept index is checked by CRC).
            if member.path.isEmpty { return true }
            guard member.kind == .symlink, let target = member.linkTarget else { return false }
            if target.hasPrefix("/") { return true }
            var depth = member.path.count - 1
            for component in target.split(separator: "/") where component != "." {
                depth += component == ".." ? -1 : 1
                if depth < 0 { return true }
            }
            return false
        }
        return kept
    }

    private static func key(_ path: ArraySlice<String>) -> FileName {
        FileName(path.joined(separator: "\u{0}"))
    }

    /// The inode of member `position` of the archive in `slot`.
    static func inode(slot: UInt32, member position: Int) -> UInt64 {
        memberBit | UInt64(slot) << 32 | UInt64(position + 1)
    }

    /// The slot and member position that `inode` stands for, if it is a member's.
    static func member(of inode: UInt64) -> (slot: UInt32, position: Int)? {
        guard inode & memberBit != 0, inode & 0xFFFF_FFFF != 0 else { return nil }
        return (UInt32((inode & ~memberBit) >> 32), Int(inode & 0xFFFF_FFFF) - 1)
    }

    func inode(of position: Int) -> UInt64 {
        Self.inode(slot: slot, member: position)
    }

    /// The folder number of member `position` if it is a folder (see `children`).
    func folder(ofMember position: Int) -> Int? {
        index.members.indices.contains(position) && index.members[position].kind == .directory ? position + 1 : nil
    }

    /// The member named `name` in `folder`.
    func child(named name: String, in folder: Int) -> Int? {
        names[folder][FileName(name)]
    }
}
