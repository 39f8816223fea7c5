// What every fuzz harness shares (bench/fuzz.sh compiles it beside each Tests/Fuzz/<Target>.swift; SwiftPM never
// sees this folder). A harness checks properties of what a parser returns, not only that it returns: a broken
// property is reported like a crash, so libFuzzer keeps the input.

#if canImport(Glibc)
import Glibc
@testable import RangeFSCatalog
import RangeFSPlatform
#endif
@testable import RangeFSSystem

/// Stops the run with `message` when `condition` is false: libFuzzer saves the input as a crash.
func fuzzRequire(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                 file: StaticString = #fileID, line: UInt = #line) {
    guard !condition() else { return }
    let text = "fuzz property broken at \(file):\(line): \(message())\n"
    fputs(text, stderr)
    abort()
}

/// The bytes libFuzzer hands a harness.
func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    // SAFETY: libFuzzer passes `size` readable bytes at `data` for the duration of the call.
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// The directory the listing targets read their pages as.
let fuzzDirectory = "http://example.org/pub/data/"

/// The page `body` stands for, laid out as minified pages are: its line breaks made spaces, and the whole repeated
/// until it is at least 16 KiB long, on one line. A reader whose work grows faster than the page shows it there.
func oneLinePage(_ body: [UInt8]) -> [UInt8] {
    guard !body.isEmpty else { return [] }
    let line = body.map { $0 == 0x0A || $0 == 0x0D ? UInt8(ascii: " ") : $0 }
    var page: [UInt8] = []
    while page.count < 16 << 10 { page += line }
    return page
}

/// Issue 45: a page is read in work proportional to its size, as it comes and laid out on one line (links sharing
/// a line once cost the rest of the line each). Counted in bytes looked at, so the property is deterministic.
func checkLinearWork(_ body: [UInt8]) {
    for page in [body, oneLinePage(body)] {
        let examined = DirectoryListing.parse(page, base: fuzzDirectory).bytesExamined
        let bound = DirectoryListing.examinedPerByte * page.count + DirectoryListing.examinedSlack
        fuzzRequire(examined <= bound, "reading a page of \(page.count) bytes looked at \(examined) (bound \(bound))")
    }
}

/// Reads `body` as the listing of `fuzzDirectory` and checks what the directory service relies on (ListingHTML,
/// ListingJSON).
func checkListing(_ body: [UInt8]) {
    _ = DirectoryListing.looksLikeListing(body)
    let listing = DirectoryListing.parse(body, base: fuzzDirectory)
    for entry in listing.entries {
        let problem = DirectoryListing.problem(withName: entry.name)
        fuzzRequire(problem == nil, "entry named \(entry.name.debugDescription): \(problem ?? "")")
        fuzzRequire(!entry.name.utf8.contains(0) && !entry.name.utf8.contains(UInt8(ascii: "/")),
                    "name \(entry.name.debugDescription) holds NUL or /")
        fuzzRequire(entry.url.hasPrefix(fuzzDirectory), "URL \(entry.url) is outside \(fuzzDirectory)")
        var segment = entry.url.utf8.dropFirst(fuzzDirectory.utf8.count)
        fuzzRequire(entry.isDirectory == (segment.last == UInt8(ascii: "/")),
                    "URL \(entry.url) and isDirectory \(entry.isDirectory) disagree")
        if entry.isDirectory { segment = segment.dropLast() }
        fuzzRequire(!segment.isEmpty && !segment.contains(UInt8(ascii: "/")) && !segment.contains(UInt8(ascii: "?"))
                    && !segment.contains(UInt8(ascii: "#")),
                    "URL \(entry.url) is not one segment below \(fuzzDirectory)")
        let decoded = PercentEncoding.bytes(String(decoding: segment, as: UTF8.self))
        fuzzRequire(decoded == Array(entry.name.utf8),
                    "name \(entry.name.debugDescription) is not URL \(entry.url)'s segment decoded")
        if let size = entry.size { fuzzRequire(!entry.isDirectory && size <= UInt64(Int64.max), "size \(size)") }
        if let time = entry.modificationTime {
            // The directory service keeps a listed date as Last-Modified (HTTPDate.format) and reads it back.
            let text = HTTPDate.format(time)
            if (-62_167_219_200..<253_402_300_800).contains(time) {  // years 0 to 9999
                fuzzRequire(HTTPDate.parse(text) == time,
                            "date \(time) formats as \(text), which reads back differently")
            }
        }
    }
    checkLinearWork(body)
    // A limit caps the entries, and says so.
    let limited = DirectoryListing.parse(body, base: fuzzDirectory, limit: 2)
    fuzzRequire(limited.entries.count <= 2, "limit 2 kept \(limited.entries.count) entries")
    fuzzRequire(limited.entries == Array(listing.entries.prefix(2)), "a limit changed the first entries")
    fuzzRequire(limited.truncated == (listing.entries.count > 2 || listing.truncated),
                "truncated is \(limited.truncated) with \(listing.entries.count) entries")
}

