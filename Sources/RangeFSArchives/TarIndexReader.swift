// A plain tar's index: its headers read by range, one 512-byte read each (a long name or pax header one more),
// its members' bodies skipped by offset. A member's data is then one range of the archive.

/// Reads a tar's headers into an `ArchiveIndex`.
package struct TarIndexReader {
    let source: any ArchiveSource
    let archive: String
    let limits: ArchiveLimits

    package init(source: any ArchiveSource, archive: String, limits: ArchiveLimits) {
        self.source = source
        self.archive = archive
        self.limits = limits
    }

    /// The archive's index.
    package func index() throws -> ArchiveIndex {
        var builder = ArchiveIndexBuilder(archive: archive, limits: limits)
        let size = source.size
        let walker = TarHeaderWalker(archive: archive, limits: limits, read: { [source] offset, count in
            guard offset < size else { return [] }
            return try source.read(offset: offset, count: count)
        }, data: { offset, length in .stored(offset: offset, length: length) })
        _ = try walker.walk(into: &builder)
        let index = builder.finish(format: .tar)
        for member in index.members {
            guard case .stored(let offset, let length) = member.data, length > size - offset else { continue }
            throw ArchiveError(archive: archive, fault: .truncated("member '\(member.pathString)'"))
        }
        return index
    }
}
