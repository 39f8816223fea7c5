// The one way the archive readers reach an archive's bytes: by range. In the mount this will be a cache entry's
// blocks (a member's read fetches only the blocks that hold it); in tests and fuzzing, a byte array, wrapped by a
// counter that records which ranges were asked for.

/// An archive's bytes, read by range.
package protocol ArchiveSource {
    /// The archive's length in bytes.
    var size: Int64 { get }
    /// `count` bytes from `offset`; fewer only where the archive ends. Errors are the source's own (a fetch's).
    func read(offset: Int64, count: Int) throws -> [UInt8]
}

extension ArchiveSource {
    /// Exactly `count` bytes at `offset`, or a `truncated` fault naming `what` was cut.
    func readExactly(offset: Int64, count: Int, archive: String, what: @autoclosure () -> String) throws -> [UInt8] {
        guard offset >= 0, count >= 0, offset <= size, Int64(count) <= size - offset else {
            throw ArchiveError(archive: archive, fault: .truncated(what()))
        }
        let bytes = try read(offset: offset, count: count)
        guard bytes.count == count else { throw ArchiveError(archive: archive, fault: .truncated(what())) }
        return bytes
    }
}

/// An archive held in memory: the tests' and the fuzz targets' source.
package struct ByteArraySource: ArchiveSource {
    package let bytes: [UInt8]

    package init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    package var size: Int64 { Int64(bytes.count) }

    package func read(offset: Int64, count: Int) throws -> [UInt8] {
        guard offset >= 0, offset < size, count > 0 else { return [] }
        let start = Int(offset)
        return Array(bytes[start..<min(bytes.count, start + count)])
    }
}
