// The bounds a hostile archive meets. An archive's claims (a member count, a name's length, a size) are the
// attacker's numbers: each is checked against these before memory is spent on it.

/// Bounds on what one archive may cost to index and to read.
package struct ArchiveLimits: Equatable, Sendable {
    /// Members per archive (ratarmount's largest reported archives hold a few hundred thousand).
    package var maximumMembers: Int
    /// The index's memory: names, link targets and a fixed cost per member, in bytes.
    package var maximumIndexBytes: Int
    /// Folders deep a member may sit (fuse-archive crashed on a tar 30,000 folders deep).
    package var maximumDepth: Int
    /// A deflated member's size against its compressed size. Deflate gives at most 1032 to 1; more is a lie.
    package var maximumInflationRatio: Int64
    /// Bytes of a tar's long name or pax header (they are read whole).
    package var maximumHeaderBytes: Int

    package init(maximumMembers: Int = 1_000_000, maximumIndexBytes: Int = 256 << 20, maximumDepth: Int = 64,
                 maximumInflationRatio: Int64 = 1032, maximumHeaderBytes: Int = 1 << 20) {
        self.maximumMembers = maximumMembers
        self.maximumIndexBytes = maximumIndexBytes
        self.maximumDepth = maximumDepth
        self.maximumInflationRatio = maximumInflationRatio
        self.maximumHeaderBytes = maximumHeaderBytes
    }

    /// What one member is counted as in `maximumIndexBytes`, besides its names' bytes.
    static let bytesPerMember = 96

    /// Whether `size` bytes can come from `compressed` deflated ones (with a little slack for tiny members).
    func inflationAllowed(size: Int64, compressed: Int64) -> Bool {
        size <= 4096 || compressed >= (size - 4096) / maximumInflationRatio
    }
}
