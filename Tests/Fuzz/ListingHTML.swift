// Fuzz target: a directory listing page as a server sends it (DirectoryListing.parse, the entry point the
// directory service calls; HTML unless the body is a JSON array). Properties: every entry is a direct child of the
// directory (its URL is the directory's plus one segment), its name is that segment percent-decoded, and the name
// can name a file (not empty, `.`, `..`, no `/` or NUL, at most 255 bytes); a limit caps the entries; dates the
// listing gives survive the HTTP-date form the directory service turns them into.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzListingHTML(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    checkListing(fuzzBytes(data, size))
    return 0
}
