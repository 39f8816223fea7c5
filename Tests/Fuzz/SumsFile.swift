// Fuzz target: a sums file beside a mounted directory's files (`SHA256SUMS`, `NAME.sha256`, BSD's
// `SHA256 (NAME) = HEX`), through DigestChecks.parseSums. Properties: every digest has its algorithm's length, no
// name keeps the `./` the parser drops, and an entry written back as sha256sum's line `HEX  NAME` reads back the
// same (for names that line can carry).

@testable import RangeFSCatalog
@testable import RangeFSFileSystem
@testable import RangeFSSystem

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSumsFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: fuzzBytes(data, size), as: UTF8.self)
    let found = DigestChecks.parseSums(text, fallbackName: "file.bin")
    for (fileName, digest) in found {
        let name = fileName.string
        fuzzRequire(digest.bytes.count == digest.algorithm.length,
                    "\(name): \(digest.algorithm) of \(digest.bytes.count) bytes")
        // A name a sha256sum line can carry: one line, no parentheses (BSD form), no leading `*`, `#`, `./` or
        // blank, no trailing blank.
        let carried = !name.isEmpty && !name.contains(where: { $0.isNewline || $0 == "(" || $0 == ")" })
            && !name.hasPrefix("*") && !name.hasPrefix("#") && !name.hasPrefix("./")
            && name.first.map { !$0.isWhitespace } ?? false && name.last.map { !$0.isWhitespace } ?? false
        guard carried else { continue }
        let line = "\(digest.hex)  \(name)\n"
        fuzzRequire(DigestChecks.parseSums(line, fallbackName: "file.bin") == [fileName: digest],
                    "\(line.debugDescription) reads back differently")
    }
    return 0
}
