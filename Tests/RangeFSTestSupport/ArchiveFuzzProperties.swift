// The properties of the archive fuzz targets (ArchiveZip, ArchiveTar, ArchiveISO), shared by their harnesses
// (bench/fuzz.sh compiles this file into them) and FuzzArchiveRegressionTests, which replays their kept inputs.
// Only the core's layers and the standard library are used here.

@testable import RangeFSArchives
@testable import RangeFSCatalog

/// The archive readers a fuzz target drives.
public enum ArchiveFuzzTarget: String, Sendable {
    case zip = "ArchiveZip"
    /// A tar, or a .tar.gz when the input starts with gzip's magic.
    case tar = "ArchiveTar"
    case iso = "ArchiveISO"
}

/// The first property `bytes`, read as `target`'s archive, break, or nil. An archive either indexes or fails with
/// an `ArchiveError` naming it; an index keeps the bounds (members, depth), holds only names a listing accepts,
/// one member per path and each member's folders before it, survives its saved form, and every file member reads
/// its size in bytes or fails with an `ArchiveError`.
public func archivePropertyBroken(_ bytes: [UInt8], _ target: ArchiveFuzzTarget) -> String? {
    let limits = ArchiveLimits(maximumMembers: 2000, maximumIndexBytes: 8 << 20, maximumDepth: 32,
                               maximumHeaderBytes: 64 << 10)
    let source = ByteArraySource(bytes)
    let index: ArchiveIndex
    do {
        switch target {
        case .zip: index = try ZipIndexReader(source: source, archive: "fuzz", limits: limits).index()
        case .tar where bytes.starts(with: [0x1F, 0x8B]):
            var reader = TarGzipIndexReader(source: source, archive: "fuzz", limits: limits)
            reader.seekSpacing = 64 << 10
            index = try reader.index()
        case .tar: index = try TarIndexReader(source: source, archive: "fuzz", limits: limits).index()
        case .iso: index = try ISO9660Reader(source: source, archive: "fuzz", limits: limits).index()
        }
    } catch let error as ArchiveError {
        let oneLine = !error.description.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
        return error.archive == "fuzz" && oneLine ? nil : "the error \(error.description.debugDescription)"
    } catch {
        return "an error that is not an ArchiveError: \(error)"
    }
    if index.members.count > limits.maximumMembers { return "\(index.members.count) members" }
    var seen: Set<FileName> = []
    var folders: Set<FileName> = []
    for member in index.members {
        let path = member.path
        if path.isEmpty || path.count > limits.maximumDepth { return "a path of \(path.count) components" }
        for component in path {
            if let problem = DirectoryListing.problem(withName: component) ?? (DirectoryListing.holdsControlCharacter(
                component) ? "a control character" : nil) {
                return "member \(path): \(problem)"
            }
        }
        let key = FileName(path.joined(separator: "/"))
        if !seen.insert(key).inserted { return "\(key) twice" }
        if path.count > 1 && !folders.contains(FileName(path.dropLast().joined(separator: "/"))) {
            return "\(key) before its folder"
        }
        if member.kind == .directory { folders.insert(key) }
        if member.size < 0 || member.mode > 0o7777 { return "\(key): size \(member.size), mode \(member.mode)" }
    }
    guard let decoded = try? ArchiveIndex(decoding: index.encoded()), decoded == index else {  // either is the break
        return "the index does not survive its saved form"
    }
    var budget = 8 << 20
    for member in index.members where member.kind == .file && budget > 0 {
        let count = Int(min(member.size, Int64(min(budget, 1 << 20))))
        budget -= count
        let reader = ArchiveMemberReader(source: source, archive: "fuzz", member: member,
                                         seekPoints: index.seekPoints, limits: limits)
        do {
            let read = try reader.read(offset: 0, count: count)
            if read.count != count { return "\(member.pathString): \(read.count) bytes read of \(count)" }
        } catch is ArchiveError {
            continue
        } catch {
            return "reading \(member.pathString): an error that is not an ArchiveError: \(error)"
        }
    }
    return nil
}
