// One member of an archive as the index keeps it: what a folder's entry needs (name, size, date, mode, kind) and
// where its bytes are, small enough that an index of 250,000 members stays in tens of MiB.

/// What a member is.
package enum ArchiveMemberKind: UInt8, Sendable {
    case file = 0
    case directory = 1
    case symlink = 2
}

/// Where a member's bytes are in the archive.
package enum ArchiveMemberData: Equatable, Sendable {
    /// No bytes: a directory, a symlink, an empty file.
    case none
    /// `length` bytes as they are, at `offset` (tar, ISO, a zip member once its local header is read).
    case stored(offset: Int64, length: Int64)
    /// A zip member: its local header at `localHeader` (whose length gives where the data starts), `compressed`
    /// bytes of data stored (`deflated` false) or deflated, whose CRC-32 is `crc32`.
    case zip(localHeader: Int64, compressed: Int64, deflated: Bool, crc32: UInt32)
    /// Bytes from `offset` of a gzip stream's inflated output (a .tar.gz member): read from the nearest seek point.
    case gzip(offset: Int64)
}

/// One member: a file, a folder or a symlink inside an archive.
package struct ArchiveMember: Equatable, Sendable {
    /// The path's components below the archive's folder, each a name a listing would accept.
    package var path: [String]
    package var kind: ArchiveMemberKind
    /// The member's length (inflated, for a compressed one).
    package var size: Int64
    /// Seconds since the epoch.
    package var modificationTime: Int64
    /// Permission bits (0o7777 at most); a reader without them gives 0o644 for files and 0o755 for folders.
    package var mode: UInt32
    /// A symlink's target, as stored (the mount decides how to show one that leaves the archive).
    package var linkTarget: String?
    package var data: ArchiveMemberData

    package init(path: [String], kind: ArchiveMemberKind, size: Int64, modificationTime: Int64, mode: UInt32,
                 linkTarget: String? = nil, data: ArchiveMemberData = .none) {
        self.path = path
        self.kind = kind
        self.size = size
        self.modificationTime = modificationTime
        self.mode = mode
        self.linkTarget = linkTarget
        self.data = data
    }

    /// The path as one string, `/` between components (for messages and tests).
    package var pathString: String { path.joined(separator: "/") }

    /// The default permission bits of a member of `kind` whose archive gives none.
    static func defaultMode(_ kind: ArchiveMemberKind) -> UInt32 {
        kind == .directory ? 0o755 : kind == .symlink ? 0o777 : 0o644
    }
}
