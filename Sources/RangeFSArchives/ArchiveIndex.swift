// An archive's table of contents, made once and kept (ArchiveIndex+Coding.swift gives its saved form). Members are
// added through `ArchiveIndexBuilder`, which holds every bound: names checked (MemberPath), the member count, the
// index's memory, a folder for every member's parents, and one member per path (a later one replaces an earlier,
// as tar itself extracts; a file never replaces a folder that holds members).
import RangeFSCatalog

/// The members of one archive, and what a .tar.gz's reader needs to start inside it.
package struct ArchiveIndex: Equatable, Sendable {
    /// Which reader made the index.
    package enum Format: UInt8, Sendable {
        case zip = 1
        case tar = 2
        case tarGzip = 3
        case iso9660 = 4
    }

    package var format: Format
    /// Every member, parents before children.
    package var members: [ArchiveMember]
    /// A .tar.gz's seek points, by inflated offset (the first at 0 is implicit and not kept).
    package var seekPoints: [GzipSeekPoint]
    /// Members left out, and why (the first `ArchiveIndexBuilder.refusalsKept`), for one log line per archive.
    package var refused: [RefusedMember]
    /// How many members were left out in all.
    package var refusedCount: Int

    package init(format: Format, members: [ArchiveMember], seekPoints: [GzipSeekPoint] = [],
                 refused: [RefusedMember] = [], refusedCount: Int = 0) {
        self.format = format
        self.members = members
        self.seekPoints = seekPoints
        self.refused = refused
        self.refusedCount = refusedCount
    }

    /// The member at `path`, if any: a scan, for tests and tools (the mount builds its own tree from `members`).
    package func member(at path: [String]) -> ArchiveMember? {
        members.first { $0.path.count == path.count && zip($0.path, path).allSatisfy { FileName.same($0, $1) } }
    }
}

/// A member the index left out: its stored name and why.
package struct RefusedMember: Equatable, Sendable {
    package var name: String
    package var reason: String
}

/// Collects an archive's members under the bounds.
struct ArchiveIndexBuilder {
    static let refusalsKept = 16

    private let archive: String
    private let limits: ArchiveLimits
    private var members: [ArchiveMember] = []
    /// Where each path's member is in `members` (the path's components joined by NUL, which no name holds).
    private var positions: [FileName: Int] = [:]
    /// The positions of folders that hold members: a file may not replace one.
    private var foldersWithChildren: Set<Int> = []
    private var indexBytes = 0
    private var refused: [RefusedMember] = []
    private var refusedCount = 0

    init(archive: String, limits: ArchiveLimits) {
        self.archive = archive
        self.limits = limits
    }

    var memberCount: Int { members.count }

    /// Adds the member stored as `name`, or records why it is left out. Throws when a bound is passed.
    mutating func add(name: String, kind: ArchiveMemberKind, size: Int64, modificationTime: Int64, mode: UInt32,
                      linkTarget: String? = nil, data: ArchiveMemberData) throws(ArchiveError) {
        let path: [String]
        switch MemberPath.components(of: name, maximumDepth: limits.maximumDepth) {
        case .root: return
        case .refused(let reason): return refuse(name, reason)
        case .components(let components): path = components
        }
        guard size >= 0 else { return refuse(name, "a negative size") }
        for depth in 1..<path.count {
            let parent = Array(path[..<depth])
            if let position = positions[key(parent)] {
                guard members[position].kind == .directory else {
                    return refuse(name, "its folder '\(parent.joined(separator: "/"))' is a file in the archive")
                }
                foldersWithChildren.insert(position)
                continue
            }
            // A folder the archive names only through its members: it takes their date until its own entry comes.
            try append(ArchiveMember(path: parent, kind: .directory, size: 0, modificationTime: modificationTime,
                                     mode: ArchiveMember.defaultMode(.directory)))
            foldersWithChildren.insert(members.count - 1)
        }
        let member = ArchiveMember(path: path, kind: kind, size: kind == .file ? size : 0,
                                   modificationTime: modificationTime, mode: mode & 0o7777,
                                   linkTarget: kind == .symlink ? linkTarget ?? "" : nil,
                                   data: kind == .file ? data : .none)
        guard let position = positions[key(path)] else { return try append(member) }
        if kind != .directory && foldersWithChildren.contains(position) {
            return refuse(name, "a folder of the same name holds members")
        }
        members[position] = member
    }

    /// The index, once every member is added.
    func finish(format: ArchiveIndex.Format, seekPoints: [GzipSeekPoint] = []) -> ArchiveIndex {
        ArchiveIndex(format: format, members: members, seekPoints: seekPoints, refused: refused,
                     refusedCount: refusedCount)
    }

    private mutating func append(_ member: ArchiveMember) throws(ArchiveError) {
        guard members.count < limits.maximumMembers else {
            throw ArchiveError(archive: archive, fault: .tooManyMembers(limit: limits.maximumMembers))
        }
        indexBytes += ArchiveLimits.bytesPerMember + (member.path.last?.utf8.count ?? 0)
            + (member.linkTarget?.utf8.count ?? 0)
        guard indexBytes <= limits.maximumIndexBytes else {
            throw ArchiveError(archive: archive, fault: .indexTooLarge(limit: limits.maximumIndexBytes))
        }
        positions[key(member.path)] = members.count
        members.append(member)
    }

    /// Leaves out the member stored as `name`, for `reason`.
    mutating func refuse(_ name: String, _ reason: String) {
        refusedCount += 1
        if refused.count < Self.refusalsKept { refused.append(RefusedMember(name: name, reason: reason)) }
    }

    private func key(_ path: [String]) -> FileName {
        FileName(path.joined(separator: "\u{0}"))
    }
}
