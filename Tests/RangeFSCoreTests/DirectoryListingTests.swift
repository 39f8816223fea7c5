@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest

/// Issue 16's listings: which links of a directory page are its children, with their names, and the sizes and
/// dates that are exact. The pages below are what each server writes (nginx 1.22, Apache 2.4, lighttpd 1.4,
/// python 3.11's http.server, Caddy 2); `DirectoryListingServerTests` reads live ones.
final class DirectoryListingTests: XCTestCase {
    let base = "http://127.0.0.1:8080/pub/"

    func parse(_ page: String, base: String? = nil) -> ParsedListing {
        DirectoryListing.parse(Array(page.utf8), base: base ?? self.base)
    }

    func names(_ listing: ParsedListing) -> [String] { listing.entries.map(\.name) }

    func testNginxHTMLGivesExactSizesOfFilesAndDatesToTheMinute() {
        let page = """
        <html>
        <head><title>Index of /pub/</title></head>
        <body>
        <h1>Index of /pub/</h1><hr><pre><a href="../">../</a>
        <a href="sub/">sub/</a>                                               23-Nov-2026 10:00                   -
        <a href="a%20b.bin">a b.bin</a>                                            23-Nov-2026 10:00             1048576
        <a href="%25.bin">%.bin</a>                                              23-Nov-2026 10:00                  12
        </pre><hr></body>
        </html>
        """
        let listing = parse(page)
        // nginx writes its HTML dates in GMT, to the minute.
        let date = HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT")
        XCTAssertNotNil(date)
        XCTAssertEqual(listing.entries, [
            ListedEntry(name: "sub", url: base + "sub/", isDirectory: true),
            ListedEntry(name: "a b.bin", url: base + "a%20b.bin", isDirectory: false, size: 1_048_576,
                        modificationTime: date),
            ListedEntry(name: "%.bin", url: base + "%25.bin", isDirectory: false, size: 12, modificationTime: date),
        ])
    }

    func testNginxJSONGivesExactSizesAndDates() {
        let page = """
        [
        { "name":"sub", "type":"directory", "mtime":"Mon, 23 Nov 2026 10:00:00 GMT" },
        { "name":"a b.bin", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:01 GMT", "size":1048576 },
        { "name":"q?#.bin", "type":"file", "mtime":"Mon, 23 Nov 2026 10:00:02 GMT", "size":0 }
        ]
        """
        let listing = parse(page)
        XCTAssertEqual(names(listing), ["sub", "a b.bin", "q?#.bin"])
        XCTAssertEqual(listing.entries[0].url, base + "sub/")
        XCTAssertTrue(listing.entries[0].isDirectory)
        XCTAssertNil(listing.entries[0].size)
        XCTAssertEqual(listing.entries[1].size, 1_048_576)
        XCTAssertEqual(listing.entries[1].modificationTime, HTTPDate.parse("Mon, 23 Nov 2026 10:00:01 GMT"))
        XCTAssertEqual(listing.entries[2].url, base + "q%3F%23.bin", "names are percent-encoded into the URL")
        XCTAssertEqual(listing.entries[2].size, 0)
    }

    func testCaddyJSONGivesExactSizesAndDates() {
        let page = """
        [{"name":"clip.mp4","size":734003200,"url":"./clip.mp4","mod_time":"2026-11-23T10:00:00.123456789Z","mode":420,"is_dir":false,"is_symlink":false},
         {"name":"old","size":4096,"url":"./old/","mod_time":"2026-11-23T11:00:00+01:00","mode":2147484141,"is_dir":true,"is_symlink":false}]
        """
        let listing = parse(page)
        XCTAssertEqual(listing.entries, [
            ListedEntry(name: "clip.mp4", url: base + "clip.mp4", isDirectory: false, size: 734_003_200,
                        modificationTime: HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"), datePrecision: .second),
            ListedEntry(name: "old", url: base + "old/", isDirectory: true,
                        modificationTime: HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"), datePrecision: .second),
        ])
    }

    func testApacheListingSkipsSortLinksAndTheParentAndItsRoundedSizes() {
        let page = """
        <!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
        <html><head><title>Index of /pub</title></head><body>
        <h1>Index of /pub</h1>
          <table>
           <tr><th valign="top"><img src="/icons/blank.gif" alt="[ICO]"></th><th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th><th><a href="?C=S;O=A">Size</a></th><th><a href="?C=D;O=A">Description</a></th></tr>
           <tr><th colspan="5"><hr></th></tr>
        <tr><td valign="top"><img src="/icons/back.gif" alt="[PARENTDIR]"></td><td><a href="/">Parent Directory</a></td><td>&nbsp;</td><td align="right">  - </td><td>&nbsp;</td></tr>
        <tr><td valign="top"><img src="/icons/unknown.gif" alt="[   ]"></td><td><a href="a%20b.bin">a b.bin</a></td><td align="right">2026-11-23 10:00  </td><td align="right">1.0M</td><td>&nbsp;</td></tr>
        <tr><td valign="top"><img src="/icons/folder.gif" alt="[DIR]"></td><td><a href="sub/">sub/</a></td><td align="right">2026-11-23 10:00  </td><td align="right">  - </td><td>&nbsp;</td></tr>
           <tr><th colspan="5"><hr></th></tr>
        </table>
        <address>Apache/2.4.62 (Debian) Server at 127.0.0.1 Port 8080</address>
        </body></html>
        """
        XCTAssertEqual(parse(page).entries, [
            ListedEntry(name: "a b.bin", url: base + "a%20b.bin", isDirectory: false),
            ListedEntry(name: "sub", url: base + "sub/", isDirectory: true),
        ])
    }

    func testLighttpdAndPythonListings() {
        let lighttpd = """
        <div class="list">
        <table summary="Directory Listing" cellpadding="0" cellspacing="0">
        <thead><tr><th class="n">Name</th><th class="m">Last Modified</th><th class="s">Size</th><th class="t">Type</th></tr></thead>
        <tbody>
        <tr class="d"><td class="n"><a href="../">..</a>/</td><td class="m">&nbsp;</td><td class="s">- &nbsp;</td><td class="t">Directory</td></tr>
        <tr class="d"><td class="n"><a href="sub/">sub</a>/</td><td class="m">2026-Nov-23 10:00:00</td><td class="s">- &nbsp;</td><td class="t">Directory</td></tr>
        <tr><td class="n"><a href="a%20b.bin">a b.bin</a></td><td class="m">2026-Nov-23 10:00:00</td><td class="s">1.0M</td><td class="t">application/octet-stream</td></tr>
        </tbody>
        </table>
        </div>
        """
        let python = """
        <!DOCTYPE HTML>
        <html lang="en"><head><meta charset="utf-8"><title>Directory listing for /pub/</title></head>
        <body><h1>Directory listing for /pub/</h1><hr><ul>
        <li><a href="a%20b.bin">a b.bin</a></li>
        <li><a href="sub/">sub/</a></li>
        <li><a href="%C3%A9t%C3%A9%20%5B1%5D%3A.mp4">été [1]:.mp4</a></li>
        </ul><hr></body></html>
        """
        XCTAssertEqual(names(parse(lighttpd)), ["sub", "a b.bin"])
        XCTAssertTrue(parse(lighttpd).entries.allSatisfy { $0.size == nil }, "rounded sizes are never taken")
        XCTAssertEqual(names(parse(python)), ["a b.bin", "sub", "été [1]:.mp4"])
    }

    func testOnlyDirectChildrenCountAndOddNamesSurvive() {
        let page = """
        <a href="../x.bin">up</a> <a href="/">root</a> <a href="/pub/">self</a> <a href="./">self</a>
        <a href="http://other.example/pub/y.bin">other host</a> <a href="http://127.0.0.1:9090/pub/y.bin">other port</a>
        <a href="https://127.0.0.1:8080/pub/y.bin">other scheme</a> <a href="mailto:a@b">mail</a>
        <a href="javascript:void(0)">js</a> <a href="#top">top</a> <a href="sub/deeper/z.bin">deeper</a>
        <a href="?C=N;O=D">sort</a> <a href="x.bin?download=1">query</a>
        <a href="http://127.0.0.1:8080/pub/abs.bin">absolute</a> <a href="/pub/rooted.bin">rooted</a>
        <a href="./dot.bin">dotted</a> <a href='single.bin'>single quotes</a> <a class=x href=bare.bin>bare</a>
        <a href="x&amp;y.bin">entity</a> <a href="_under.bin">under</a> <a href="%5Bbracket%5D.bin">bracket</a>
        <a href="100%25.bin">percent</a> <a href="a%23b.bin">hash</a> <a href="c%3Fd.bin">question</a>
        <a href="./e:f.bin">colon</a> <a href="g:h.bin">bare colon</a> <a href="abs.bin">the same file again</a>
        """
        let listing = parse(page)
        XCTAssertEqual(names(listing), ["abs.bin", "rooted.bin", "dot.bin", "single.bin", "bare.bin", "x&y.bin",
                                        "_under.bin", "[bracket].bin", "100%.bin", "a#b.bin", "c?d.bin", "e:f.bin", "g:h.bin"])
        XCTAssertEqual(listing.entries.first { $0.name == "c?d.bin" }?.url, base + "c%3Fd.bin")
    }

    func testHostileLinksAreSkippedWithAReasonAndTheRestStillWork() {
        let long = String(repeating: "n", count: 4096)
        let page = """
        <a href="%2E%2E/">dots</a> <a href="a%2Fb.bin">slash</a> <a href="\(long).bin">long</a>
        <a href="%FF%FE.bin">not utf-8</a> <a href="good.bin">good</a>
        """
        let listing = parse(page)
        XCTAssertEqual(names(listing), ["good.bin"])
        XCTAssertEqual(listing.skipped.count, 4)
        XCTAssertTrue(listing.skipped.contains { $0.reason.contains("'/'") })
        XCTAssertTrue(listing.skipped.contains { $0.reason.contains("255") })
        XCTAssertTrue(listing.skipped.contains { $0.reason.contains("UTF-8") })
    }

    /// Issue 35: the NFC and NFD spellings of `é.txt` are two children, in JSON and in HTML, even when a page
    /// writes them unencoded (their URLs are then percent-encoded, one spelling per URL); names with control
    /// characters (NUL, newline, tab, any C0, DEL) are gathered apart, for one log line per directory.
    func testNamesAreBytesAndNamesWithControlCharactersAreLeftOut() {
        func bytes(_ listing: ParsedListing) -> [[UInt8]] { listing.entries.map { Array($0.name.utf8) } }
        let nfc = Array("\u{E9}.txt".utf8), nfd = Array("e\u{301}.txt".utf8)
        let json = parse(#"[{"name":"\u00e9.txt","type":"file","size":3},{"name":"e\u0301.txt","type":"file","size":4},"#
                         + #"{"name":"new\nline.txt","type":"file","size":1},{"name":"t\tab.txt","type":"file","size":1}]"#)
        XCTAssertEqual(bytes(json), [nfc, nfd])
        XCTAssertEqual(json.entries.map(\.url), [base + "%C3%A9.txt", base + "e%CC%81.txt"])
        XCTAssertEqual(json.controlNames.map { Array($0.utf8) }, [Array("new\nline.txt".utf8), Array("t\tab.txt".utf8)])
        XCTAssertTrue(json.skipped.isEmpty)
        let html = parse("<a href=\"%C3%A9.txt\">1</a> <a href=\"e%CC%81.txt\">2</a> <a href=\"\u{E9}raw.txt\">3</a>"
                         + " <a href=\"e\u{301}raw.txt\">4</a> <a href=\"new%0Aline.txt\">5</a> <a href=\"t%09ab.txt\">6</a>"
                         + " <a href=\"bell%07.txt\">7</a> <a href=\"nul%00.txt\">8</a> <a href=\"del%7F.txt\">9</a>")
        XCTAssertEqual(bytes(html), [nfc, nfd, Array("\u{E9}raw.txt".utf8), Array("e\u{301}raw.txt".utf8)])
        XCTAssertEqual(html.entries.map(\.url), [base + "%C3%A9.txt", base + "e%CC%81.txt", base + "%C3%A9raw.txt",
                                                 base + "e%CC%81raw.txt"])
        XCTAssertEqual(html.controlNames.count, 5)
        XCTAssertTrue(html.skipped.isEmpty, "\(html.skipped)")
        XCTAssertEqual(DirectoryListing.escapedForLog("a\nb\tc\u{7}"), "a\\nb\\tc\\x07")
    }

    func testAHundredThousandEntriesAreKeptWholeAndAPageIsCutOnlyAtItsLimit() {
        var page = "<ul>\n"
        for index in 0..<100_000 { page += "<li><a href=\"f\(index).bin\">f\(index).bin</a></li>\n" }
        XCTAssertGreaterThanOrEqual(DirectoryListing.maximumEntries, 1_000_000, "no cap below a million entries")
        let whole = parse(page)
        XCTAssertEqual(whole.entries.count, 100_000)
        XCTAssertFalse(whole.truncated)
        let cut = DirectoryListing.parse(Array(page.utf8), base: base, limit: 1000)
        XCTAssertEqual(cut.entries.count, 1000)
        XCTAssertTrue(cut.truncated)
    }

    func testTheDirectoryURLMayHoldCredentialsAndNoTrailingSlash() {
        let listing = parse(#"<a href="http://127.0.0.1:8080/data/f.bin">f</a> <a href="g.bin">g</a>"#,
                            base: "http://u:p@127.0.0.1:8080/data")
        XCTAssertEqual(listing.entries.map(\.url), ["http://u:p@127.0.0.1:8080/data/f.bin", "http://u:p@127.0.0.1:8080/data/g.bin"])
        let implied = parse(#"<a href="http://example.org:80/x/a.bin">a</a>"#, base: "http://example.org/x/")
        XCTAssertEqual(names(implied), ["a.bin"], "port 80 is the http default")
    }

    /// JSON listings are read by a reader of their own (fast for 100,000 entries); escapes, non-ASCII names and
    /// surrogate pairs come through, and a listing it cannot read (nested values) is read by the JSON decoder
    /// instead, with the same strings, numbers and booleans.
    func testJSONEscapesAndNestedValuesAreReadRight() {
        let page = #"""
        [ {"name":"q\"uote \u00e9\ud83d\ude00.bin","type":"file","size":12,"mtime":"Mon, 23 Nov 2026 10:00:00 GMT"},
          {"name":"sub","type":"directory","mtime":"Mon, 23 Nov 2026 10:00:00 GMT"},
          {"name":"caddy.bin","size":1e3,"is_dir":false,"mod_time":"2026-11-23T10:00:00Z"} ]
        """#
        let listing = parse(page)
        XCTAssertEqual(listing.entries.map(\.name), ["q\"uote é😀.bin", "sub", "caddy.bin"])
        XCTAssertEqual(listing.entries.map(\.size), [12, nil, 1000])
        XCTAssertEqual(listing.entries.map(\.isDirectory), [false, true, false])
        XCTAssertEqual(listing.entries[0].modificationTime, HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"))
        XCTAssertEqual(listing.entries[2].modificationTime, HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"))
        let nested = parse(#"[{"name":"x.bin","size":5,"extra":{"owner":[1,2]}}]"#)
        XCTAssertEqual(nested.entries.map(\.name), ["x.bin"])
        XCTAssertEqual(nested.entries.first?.size, 5)
        let nestedCaddy = parse(#"[{"name":"d","is_dir":true,"tags":[]},{"name":"f.bin","size":2e3,"is_dir":false,"#
                                + #""mod_time":"2026-11-23T10:00:00Z","owner":{"id":1}}]"#)
        XCTAssertEqual(nestedCaddy.entries.map(\.name), ["d", "f.bin"])
        XCTAssertEqual(nestedCaddy.entries.map(\.isDirectory), [true, false])
        XCTAssertEqual(nestedCaddy.entries.map(\.size), [nil, 2000])
        XCTAssertEqual(nestedCaddy.entries[1].modificationTime, HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"))
        XCTAssertEqual(parse(#"[{"name":"broken.bin","size":5"#).entries.count, 0, "not JSON: no entries")
    }

    /// A body that starts with `[` is a listing only if it is a JSON array: an empty one is nginx's empty folder;
    /// an INI file or a log line is not.
    func testOnlyAJSONArrayThatStartsWithABracketLooksLikeAListing() {
        XCTAssertTrue(DirectoryListing.looksLikeListing(Array("[]".utf8)))
        XCTAssertTrue(DirectoryListing.looksLikeListing(Array(" [ {\"name\": \"a\", \"x\": [1, {}]} ]\n".utf8)))
        XCTAssertFalse(DirectoryListing.looksLikeListing(Array("[section]\nkey=value\n".utf8)))
        XCTAssertFalse(DirectoryListing.looksLikeListing(Array("[2026-11-26 04:00:00] started\n".utf8)))
        XCTAssertFalse(DirectoryListing.looksLikeListing(Array("{\"name\": \"a\"}".utf8)), "an object is not a listing")
    }
}
