// The archive readers' one error type. Every fault names the archive and what is wrong with it, in one line, so
// the mount can answer EIO for that archive (or that member) and log the line, and nothing else is affected.
import RangeFSCatalog

/// A fault found in an archive: which archive, and what.
package struct ArchiveError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The archive's name as the user knows it (its URL's last segment, say).
    package let archive: String
    package let fault: ArchiveFault

    package init(archive: String, fault: ArchiveFault) {
        self.archive = archive
        self.fault = fault
    }

    /// One line for a person: the archive, the fault, and what to do. Member names are the archive's bytes, so
    /// their control characters are escaped as a listing's names are in the log (found by the ArchiveZip fuzzer).
    package var description: String {
        DirectoryListing.escapedForLog("archive \(archive): \(fault); the archive is damaged or not what its name "
            + "says (check it with its own tool: unzip -t, tar -t, xorriso -indev)")
    }
}

/// What is wrong with an archive.
package enum ArchiveFault: Equatable, Sendable, CustomStringConvertible {
    /// The archive ends before this structure does.
    case truncated(String)
    /// A structure that cannot be read (a bad signature, a checksum, a field out of range), and where.
    case malformed(String)
    /// Something this reader does not read (an encrypted zip member, a compression method other than deflate).
    case unsupported(String)
    /// More members than the bound.
    case tooManyMembers(limit: Int)
    /// Names and fields adding up to more memory than the bound (bytes).
    case indexTooLarge(limit: Int)
    /// A member whose size against its compressed size exceeds what deflate can give: a bomb.
    case inflationRatio(member: String, size: Int64, compressed: Int64)
    /// Two members sharing bytes of the archive (a zip bomb's trick), or a member over the central directory.
    case overlapping(member: String)
    /// A member whose data did not check out (CRC-32, its length once inflated).
    case badMemberData(member: String, reason: String)
    /// Bytes after the last gzip member that are not another gzip member.
    case trailingGarbage(offset: Int64)

    package var description: String {
        switch self {
        case .truncated(let what): "it ends inside \(what)"
        case .malformed(let what): "malformed: \(what)"
        case .unsupported(let what): "unsupported: \(what)"
        case .tooManyMembers(let limit): "more than \(limit) members"
        case .indexTooLarge(let limit): "its index would take more than \(limit) bytes of memory"
        case .inflationRatio(let member, let size, let compressed):
            "member '\(member)' claims \(size) bytes from \(compressed) compressed, more than deflate can give"
        case .overlapping(let member): "member '\(member)' overlaps another member or the directory"
        case .badMemberData(let member, let reason): "member '\(member)': \(reason)"
        case .trailingGarbage(let offset): "bytes at \(offset) after the gzip stream are not gzip"
        }
    }
}
