// Fuzz target: a zip (ZipIndexReader): the central directory from the end, members read and checked.
// The properties are in RangeFSTestSupport/ArchiveFuzzProperties.swift (`archivePropertyBroken`): an index or an
// ArchiveError naming the archive; bounds kept; names a listing accepts, once each, after their folders; the saved
// form reads back the same; every file member reads its size or fails with an ArchiveError.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArchiveZip(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = archivePropertyBroken(fuzzBytes(data, size), .zip) { fuzzRequire(false, broken) }
    return 0
}
