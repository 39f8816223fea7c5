// Fuzz target: what a response's head must state before its body is kept (ResponseHead+Trust.swift,
// ResponseHead+Range.swift). The input: a byte choosing the status (200, 206, 416, 503), one whether a range was
// asked, 16 bytes of the asked range (two little-endian UInt64s, the smaller first, at most 2^40), then header
// lines `name: value`. Properties: an answer is a part only as a 200 or 206, with a range where it is a 200, and
// a part that fits lies inside the ask; a whole file only as a 200 whose Content-Range (if any) is the whole file;
// a body trusted for a length is in no encoding but identity, no multipart (a whole file may have any type),
// and states that length if it states one.

@testable import RangeFSFetch

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHeadChecks(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard bytes.count >= 18 else { return 0 }
    let status = [200, 206, 416, 503][Int(bytes[0] % 4)]
    func number(_ at: Int) -> UInt64 {
        bytes[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } % (1 << 40)
    }
    let (first, second) = (number(2), number(10))
    let asked: Range<UInt64>? = bytes[1] % 2 == 0 || first == second ? nil : min(first, second)..<max(first, second)
    var headers: [String: String] = [:]
    for line in String(decoding: bytes[18...], as: UTF8.self).split(whereSeparator: \.isNewline) {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingWhitespace()
    }
    let head = ResponseHead(status: status, headers: headers)
    switch head.carriedBytes(asked: asked) {
    case .part(let contentRange):
        fuzzRequire(status == 206 || status == 200, "a part in a \(status)")
        if status == 200 { fuzzRequire(contentRange.range?.lowerBound == asked?.lowerBound, "a 200 part elsewhere") }
        if let asked, contentRange.fits(asked), let range = contentRange.range {
            fuzzRequire(!range.isEmpty && range.lowerBound == asked.lowerBound && range.upperBound <= asked.upperBound,
                        "part \(range) fits \(asked)")
        }
    case .wholeFile:
        fuzzRequire(status == 200, "a whole file in a \(status)")
        if let value = headers["content-range"] {
            let contentRange = ContentRange(parsing: value)
            fuzzRequire(contentRange?.range?.lowerBound == 0 && contentRange?.range?.upperBound
                        == contentRange?.completeLength, "whole file under Content-Range \(value)")
        }
    case .otherStatus:
        fuzzRequire(status != 200 && status != 206, "\(status) is no other status")
    case .wrongRange:
        break
    }
    let length = asked.map { UInt64($0.count) }
    if head.untrustedBody(expectedLength: length) == nil {
        fuzzRequire(head.foreignEncoding == nil, "a \(headers["content-encoding"] ?? "") body trusted")
        fuzzRequire(length == nil || !(headers["content-type"]?.lowercased().hasPrefix("multipart/") ?? false),
                    "a multipart part trusted")
        if let length, head.statesItsLength {
            fuzzRequire(UInt64(headers["content-length"] ?? "") == length, "a Content-Length other than \(length) trusted")
        }
    } else {
        fuzzRequire(head.untrustedBody(expectedLength: nil) != nil || length != nil, "refused for no length")
    }
    return 0
}
