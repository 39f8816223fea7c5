// Fuzz target: a v2 entry's meta block, its slots and the footer of a small entry's file (MetaBlock.swift), as
// read back from disk. The properties are in RangeFSTestSupport/FuzzProperties.swift (`metaBlockPropertyBroken`):
// a meta block that decodes has the length its header implies, a CRC per block, and a slot (if any) of its own
// generation and block count; a slot or footer that decodes encodes to the bytes it came from.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMetaBlock(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = metaBlockPropertyBroken(fuzzBytes(data, size)) { fuzzRequire(false, broken) }
    return 0
}
