// Fuzz target: the digests a server announces (`Repr-Digest: sha-256=:BASE64:`, RFC 9530; `Digest: SHA-256=BASE64`,
// RFC 3230) and the `sha256=HEX` form users and list files give (ContentDigest(parsing:)). The input is the
// Repr-Digest value, then a newline and the Digest value. Properties: a digest found has its algorithm's length,
// and its canonical header and text forms read back to the same digest.

import Foundation
@testable import RangeFSCache
@testable import RangeFSFetch
@testable import RangeFSSystem

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDigestHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    let newline = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
    let reprDigest = String(decoding: bytes[..<newline], as: UTF8.self)
    let digestHeader = newline < bytes.endIndex ? String(decoding: bytes[(newline + 1)...], as: UTF8.self) : nil
    if let found = ProbedMetadata.digest(reprDigest: reprDigest, digest: digestHeader) {
        fuzzRequire(found.bytes.count == found.algorithm.length, "\(found.algorithm) of \(found.bytes.count) bytes")
        let name = found.algorithm == .sha256 ? "sha-256" : "sha-512"
        let canonical = "\(name)=:\(Data(found.bytes).base64EncodedString()):"
        fuzzRequire(ProbedMetadata.digest(reprDigest: canonical, digest: nil) == found,
                    "\(canonical) reads back differently")
        fuzzRequire(ContentDigest(parsing: found.description) == found, "\(found) reads back differently")
    }
    for text in [reprDigest, digestHeader ?? ""] {
        guard let parsed = ContentDigest(parsing: text) else { continue }
        fuzzRequire(parsed.bytes.count == parsed.algorithm.length, "\(parsed.algorithm) of \(parsed.bytes.count) bytes")
        fuzzRequire(ContentDigest(parsing: parsed.description) == parsed, "\(parsed) reads back differently")
        fuzzRequire(ContentDigest.bytes(hex: parsed.hex) == parsed.bytes, "hex \(parsed.hex) reads back differently")
    }
    return 0
}
