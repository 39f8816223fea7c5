// Fuzz target: what a response's head must state before any byte of its body is kept (ResponseHead+Trust.swift,
// ResponseHead+Range.swift) and how its validators are matched with the cached version's (RemoteMetadata). The
// input is a head as text: a first line `STATUS FIRST LAST` (the status, and the byte range asked for; a missing
// or bad line asks for bytes 0-65535 and reads 206), then `name: value` lines. Properties (checked in
// Tests/RangeFSTestSupport/FuzzProperties.swift, which FuzzHeadRegressionTests replays): a multipart/byteranges
// part, or a body in another encoding than identity, is never trusted; a trusted part that states its length
// states the span; a 200 is a part only of the bytes asked for; a version never contradicts itself, and
// contradiction is symmetric.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = responseHeadPropertyBroken(fuzzBytes(data, size)) { fuzzRequire(false, broken) }
    return 0
}
