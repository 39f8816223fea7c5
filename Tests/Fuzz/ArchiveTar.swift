// Fuzz target: a tar (TarIndexReader), or a .tar.gz (TarGzipIndexReader, seek points every 64 KiB) when the input starts with gzip's magic.
// The properties are in RangeFSTestSupport/ArchiveFuzzProperties.swift (`archivePropertyBroken`): an index or an
// ArchiveError naming the archive; bounds kept; names a listing accepts, once each, after their folders; the saved
// form reads back the same; every file member reads its size or fails with an ArchiveError.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArchiveTar(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = archivePropertyBroken(fuzzBytes(data, size), .tar) { fuzzRequire(false, broken) }
    return 0
}
