// Fuzz target: a listing as binary records (ListingRecords.swift), as an object store's pages are gathered and
// as a kept listing is read back at an offline remount. The record properties are in
// RangeFSTestSupport/FuzzProperties.swift (`listingRecordsPropertyBroken`); the listing the records make is checked
// as the other listings are (`checkListing`): names a file can have, one segment below the directory.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzListingRecords(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if let broken = listingRecordsPropertyBroken(bytes) { fuzzRequire(false, broken) }
    checkListing(listingRecordsFramed(bytes))
    return 0
}
