// Fuzz target: an ISO 9660 image (ISO9660Reader.index()): descriptors, folders, Rock Ridge and Joliet fields.
// The properties are in RangeFSTestSupport/ArchiveFuzzProperties.swift (`archivePropertyBroken`): an index or an
// ArchiveError naming the archive; bounds kept; names a listing accepts, once each, after their folders; the saved
// form reads back the same; every file member reads its size or fails with an ArchiveError.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArchiveISO(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = archivePropertyBroken(fuzzBytes(data, size), .iso) { fuzzRequire(false, broken) }
    return 0
}
