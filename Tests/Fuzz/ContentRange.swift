// Fuzz target: the response headers whose values rangefs parses itself: `Content-Range` (ContentRange, which
// decides where a 206's bytes go), `Last-Modified` (HTTPDate) and `Content-Disposition` (a file's name). The input
// is one header value. Properties: a parsed range is non-empty and lies inside the complete length, a length a
// file can have (an off_t), and its canonical form reads back the same; a parsed date of years 0 to 9999 formats
// and reads back the same; a name from Content-Disposition is not empty.

@testable import RangeFSFetch
@testable import RangeFSSystem

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentRange(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: fuzzBytes(data, size), as: UTF8.self)
    if let parsed = ContentRange(parsing: text) {
        if let range = parsed.range {
            fuzzRequire(!range.isEmpty, "empty range from \(text.debugDescription)")
            if let complete = parsed.completeLength {
                fuzzRequire(range.upperBound <= complete, "range \(range) past complete length \(complete)")
            }
        }
        if let complete = parsed.completeLength {
            fuzzRequire(complete <= UInt64(Int64.max), "complete length \(complete) is more than a file can hold")
        }
        let first = parsed.range.map { "\($0.lowerBound)-\($0.upperBound - 1)" } ?? "*"
        let canonical = "bytes \(first)/\(parsed.completeLength.map(String.init) ?? "*")"
        fuzzRequire(ContentRange(parsing: canonical) == parsed, "\(canonical) reads back differently")
    }
    if let time = HTTPDate.parse(text), (-62_167_219_200..<253_402_300_800).contains(time) {
        let formatted = HTTPDate.format(time)
        fuzzRequire(HTTPDate.parse(formatted) == time, "\(text.debugDescription) is \(time), formatted \(formatted)")
    }
    if let name = ContentDisposition.filename(from: text) {
        fuzzRequire(!name.isEmpty, "empty name from \(text.debugDescription)")
    }
    return 0
}
