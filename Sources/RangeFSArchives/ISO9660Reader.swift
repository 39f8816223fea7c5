// An ISO 9660 image read by range, with no index: the volume descriptors from sector 16 on (one read), then each
// folder's extent in one read when the folder is listed. Names come from Rock Ridge when the image has it (POSIX
// names, modes, dates and symlinks: RockRidge.swift), else from Joliet's supplementary descriptor (UCS-2 names),
// else the plain names without their `;1` version. A file's data is one range of the image.
//
// Hostile images: a folder's extent is bounded (ArchiveLimits.maximumIndexBytes) and must lie in the image; records
// are checked against their extent; walking the whole tree (`index()`) visits each extent once, so a folder that
// names an ancestor cannot loop, and the builder's bounds on depth and member count hold. Files in several extents
// (over 4 GiB) and relocated folders are left out.
import RangeFSCatalog

/// Reads an ISO 9660 image's folders by range.
package struct ISO9660Reader {
    private static let sector: Int64 = 2048

    /// Where a folder's records are.
    struct Folder: Equatable {
        var offset: Int64
        var length: Int64
    }

    /// Which names the image's folders are read with.
    enum Names {
        case rockRidge(skip: Int)
        case joliet
        case plain
    }

    let source: any ArchiveSource
    let archive: String
    let limits: ArchiveLimits
    /// Whether Rock Ridge's names win over Joliet's when the image has both (xorriso always writes Rock Ridge).
    var rockRidge = true

    package init(source: any ArchiveSource, archive: String, limits: ArchiveLimits, rockRidge: Bool = true) {
        self.source = source
        self.archive = archive
        self.limits = limits
        self.rockRidge = rockRidge
    }

    /// The root folder and the names to read, from the volume descriptors.
    func volume() throws -> (root: Folder, names: Names) {
        let descriptors = try source.readExactly(offset: 16 * Self.sector, count: Int(min(16 * Self.sector,
                                                 source.size - 16 * Self.sector)), archive: archive,
                                                 what: "the volume descriptors")
        var primary: Folder?
        var joliet: Folder?
        var position = 0
        while position + Int(Self.sector) <= descriptors.count {
            let descriptor = Array(descriptors[position..<(position + Int(Self.sector))])
            guard descriptor[1...5].elementsEqual("CD001".utf8) else { break }
            if descriptor[0] == 255 { break }
            let root = Folder(offset: Int64(descriptor.littleEndian32(at: 158)) * Self.sector,
                              length: Int64(descriptor.littleEndian32(at: 166)))
            if descriptor[0] == 1 && primary == nil { primary = root }
            if descriptor[0] == 2 && descriptor[88] == 0x25 && descriptor[89] == 0x2F
                && [0x40, 0x43, 0x45].contains(descriptor[90]) {
                joliet = root
            }
            position += Int(Self.sector)
        }
        guard let primary else { throw fault(.malformed("no primary volume descriptor (not an ISO 9660 image)")) }
        // Rock Ridge: the root's own record ('.') begins its System Use area with SUSP's SP entry.
        let first = try records(of: primary, names: .plain, includeSelf: true).first
        if rockRidge, let skip = first?.rockRidgeSkip { return (primary, .rockRidge(skip: skip)) }
        if let joliet { return (joliet, .joliet) }
        return (primary, .plain)
    }

    /// One folder's members, named as `names` says; a member folder's data is its own records' place.
    func members(of folder: Folder, names: Names) throws -> [(name: String, member: ArchiveMember)] {
        try records(of: folder, names: names, includeSelf: false).compactMap { record in
            record.relocated ? nil : (record.name, record.member)
        }
    }

    /// Every member of the image, walked folder by folder (for a small image, and the tests).
    package func index() throws -> ArchiveIndex {
        let (root, names) = try volume()
        var builder = ArchiveIndexBuilder(archive: archive, limits: limits)
        var visited: Set<Int64> = [root.offset]
        var pending: [(path: String, folder: Folder)] = [("", root)]
        while let (path, folder) = pending.popLast() {
            for (name, member) in try members(of: folder, names: names) {
                // A Rock Ridge name is the image's bytes: it may hold a '/' or be '..', checked as a listed name.
                if let problem = DirectoryListing.problem(withName: name)
                    ?? (DirectoryListing.holdsControlCharacter(name) ? "a control character in its name" : nil) {
                    builder.refuse(path + name, problem)
                    continue
                }
                let full = path + name
                if member.kind == .directory, case .stored(let offset, let length) = member.data {
                    guard visited.insert(offset).inserted else {
                        builder.refuse(full, "a folder whose records another folder has (a loop)")
                        continue
                    }
                    pending.append((full + "/", Folder(offset: offset, length: length)))
                }
                try builder.add(name: full, kind: member.kind, size: member.size,
                                modificationTime: member.modificationTime, mode: member.mode,
                                linkTarget: member.linkTarget, data: member.kind == .file ? member.data : .none)
            }
        }
        return builder.finish(format: .iso9660)
    }

    private struct Record {
        var name: String
        var member: ArchiveMember
        var relocated: Bool
        var rockRidgeSkip: Int?
    }

    /// The records of `folder`, read in one range.
    private func records(of folder: Folder, names: Names, includeSelf: Bool) throws -> [Record] {
        guard folder.length <= Int64(limits.maximumIndexBytes) else {
            throw fault(.indexTooLarge(limit: limits.maximumIndexBytes))
        }
        let bytes = try source.readExactly(offset: folder.offset, count: Int(folder.length), archive: archive,
                                           what: "the folder at \(folder.offset)")
        var records: [Record] = []
        var position = 0
        while position < bytes.count {
            let length = Int(bytes[position])
            if length == 0 {  // records do not cross sectors: the rest of this one is padding
                position = (position / Int(Self.sector) + 1) * Int(Self.sector)
                continue
            }
            guard length >= 34, position + length <= bytes.count,
                  33 + Int(bytes[position + 32]) <= length else {
                throw fault(.malformed("a directory record at \(folder.offset + Int64(position))"))
            }
            let record = Array(bytes[position..<(position + length)])
            position += length
            if let parsed = try parse(record, names: names, keepSelf: includeSelf) {
                records.append(parsed)
                if includeSelf { break }
            }
        }
        return records
    }

    /// One record as a member; nil for `.` and `..` unless `keepSelf` (`volume()` reads the root's `.`).
    private func parse(_ record: [UInt8], names: Names, keepSelf: Bool) throws -> Record? {
        let nameLength = Int(record[32])
        let rawName = Array(record[33..<(33 + nameLength)])
        let isSelfOrParent = nameLength == 1 && rawName[0] <= 1
        if isSelfOrParent && !keepSelf { return nil }  // before its fields: a CE there would cost a read
        let flags = record[25]
        var kind: ArchiveMemberKind = flags & 2 != 0 ? .directory : .file
        let extent = Int64(record.littleEndian32(at: 2)) * Self.sector
        let size = Int64(record.littleEndian32(at: 10))
        var name: String
        switch names {
        case .joliet:
            var units: [UInt16] = []
            for index in stride(from: 0, to: rawName.count - 1, by: 2) {
                units.append(UInt16(rawName[index]) << 8 | UInt16(rawName[index + 1]))
            }
            name = Self.withoutVersion(String(decoding: units, as: UTF16.self))
        case .plain, .rockRidge:
            name = Self.withoutVersion(String(decoding: rawName, as: UTF8.self))
        }
        var mode = ArchiveMember.defaultMode(kind)
        var modificationTime = isoRecordTime(Array(record[18..<25])) ?? 0
        var linkTarget: String?
        var relocated = false
        var skip: Int?
        let systemUse = 33 + nameLength + (nameLength % 2 == 0 ? 1 : 0)
        if systemUse < record.count {
            var areaStart = systemUse
            if case .rockRidge(let bytes) = names { areaStart += bytes }
            let area = areaStart < record.count ? Array(record[areaStart...]) : []
            let fields = try RockRidgeFields(area) { offset, count in
                try source.readExactly(offset: offset, count: count, archive: archive, what: "a continuation area")
            }
            skip = fields.skip
            if case .rockRidge = names {
                if let rockName = fields.name, !fields.selfOrParent { name = rockName }
                if let rockMode = fields.mode {
                    kind = switch rockMode & 0o170000 {
                    case 0o120000: .symlink
                    case 0o040000: .directory
                    default: kind
                    }
                    mode = rockMode & 0o7777
                }
                modificationTime = fields.modificationTime ?? modificationTime
                linkTarget = fields.linkTarget
                relocated = fields.relocated
            }
        }
        if flags & 0x80 != 0 {
            // More extents follow for this file (over 4 GiB): not read yet, so not listed.
            return nil
        }
        let member = ArchiveMember(path: [name], kind: kind, size: kind == .file ? size : 0,
                                   modificationTime: modificationTime, mode: mode, linkTarget: linkTarget,
                                   data: kind == .symlink ? .none : .stored(offset: extent, length: size))
        return Record(name: name, member: member, relocated: relocated, rockRidgeSkip: skip)
    }

    /// A plain or Joliet name without its `;1` version and the `.` of a name with no extension.
    private static func withoutVersion(_ name: String) -> String {
        var name = Substring(name)
        if let semicolon = name.lastIndex(of: ";") { name = name[..<semicolon] }
        if name.hasSuffix(".") && name.count > 1 { name = name.dropLast() }
        return String(name)
    }

    private func fault(_ fault: ArchiveFault) -> ArchiveError {
        ArchiveError(archive: archive, fault: fault)
    }
}
