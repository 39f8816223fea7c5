@testable import RangeFSCache
@testable import RangeFSCatalog
import Foundation
@testable import RangeFSFetch
import RangeFSPlatform
@testable import RangeFSSystem
import RangeFSTestSupport
import XCTest
@testable import RangeFSObjectStore

/// Replays what the fuzzers (`bench/fuzz.sh`, harnesses in Tests/Fuzz) keep: every input that once broke a parser
/// (Tests/Fuzz/regressions/<Target>/) and the seeds they start from (Tests/Fuzz/seeds/<Target>/), each fed to the
/// same entry point and framed the same way as its harness, with the harness's properties checked here by XCTest.
/// A fuzzer finding becomes a regression input by copying its crash file into the target's regressions folder.
final class FuzzRegressionTests: XCTestCase {
    /// The inputs kept for `target` in `folder` ("regressions" or "seeds"), by file name.
    private func inputs(_ folder: String, of target: String) throws -> [(name: String, bytes: [UInt8])] {
        try XCTUnwrap(FuzzInputs.kept(folder, of: target), "no \(folder) folder for \(target)")
    }

    /// Every regression input of `target`, then every seed; fails if there is none of either kind.
    private func replay(_ target: String, regressions expected: Bool = true,
                        _ check: (String, [UInt8]) -> Void) throws {
        let regressions = expected ? try inputs("regressions", of: target) : []
        let seeds = try inputs("seeds", of: target)
        if expected { XCTAssertFalse(regressions.isEmpty, "no regression inputs for \(target)") }
        XCTAssertFalse(seeds.isEmpty, "no seeds for \(target)")
        for (name, bytes) in regressions + seeds { check("\(target)/\(name)", bytes) }
    }

    // MARK: Listings

    func testListingHTMLInputs() throws {
        try replay("ListingHTML") { name, bytes in checkListing(bytes, name) }
    }

    func testListingJSONInputs() throws {
        try replay("ListingJSON") { name, bytes in
            checkListing(bytes, name)
            // The fast reader reads what JSONSerialization reads, wherever both read the bytes.
            guard let fast = ListingJSON.objects(bytes),
                  let slow = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [[String: Any]]  // not JSON
            else { return }
            XCTAssertEqual(fast.count, slow.count, name)
            for (object, reference) in zip(fast, slow) {
                for (key, value) in object.strings {
                    XCTAssertEqual(reference[key] as? String, value, "\(name): \(key)")
                }
                for (key, value) in object.numbers {
                    XCTAssertEqual((reference[key] as? NSNumber)?.doubleValue, value, "\(name): \(key)")
                }
            }
        }
    }

    /// ListingHTML and ListingJSON's properties: children one segment below the directory, named by that segment
    /// decoded, with names a file can have; a listed date survives the Last-Modified form it is kept in.
    private func checkListing(_ body: [UInt8], _ input: String) {
        let directory = "http://example.org/pub/data/"
        let listing = DirectoryListing.parse(body, base: directory)
        for entry in listing.entries {
            XCTAssertNil(DirectoryListing.problem(withName: entry.name), "\(input): \(entry.name.debugDescription)")
            XCTAssertTrue(entry.url.hasPrefix(directory), "\(input): \(entry.url) is outside the directory")
            var segment = String(entry.url.dropFirst(directory.count))
            if entry.isDirectory { segment = String(segment.dropLast()) }
            XCTAssertFalse(entry.name.utf8.contains(UInt8(ascii: "/")) || entry.name.utf8.contains(0),
                           "\(input): \(entry.name.debugDescription)")
            // Bytes, not Characters: a combining mark after `/` or `#` makes a Character that is neither.
            XCTAssertFalse(segment.isEmpty || segment.utf8.contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "#")
                               || $0 == UInt8(ascii: "?") }, "\(input): \(entry.url) is not a child")
            XCTAssertEqual(PercentEncoding.bytes(segment), Array(entry.name.utf8), "\(input): \(entry.url)")
            if let size = entry.size { XCTAssertLessThanOrEqual(size, UInt64(Int64.max), "\(input): a file's size") }
            if let time = entry.modificationTime, (-62_167_219_200..<253_402_300_800).contains(time) {
                XCTAssertEqual(HTTPDate.parse(HTTPDate.format(time)), time,
                               "\(input): \(time) kept as \(HTTPDate.format(time))")
            }
        }
        let limited = DirectoryListing.parse(body, base: directory, limit: 2)
        XCTAssertEqual(limited.entries, Array(listing.entries.prefix(2)), input)
        XCTAssertEqual(limited.truncated, listing.entries.count > 2 || listing.truncated, input)
        // Work in proportion to the page, as it comes and on one line (FuzzSupport.swift's `checkLinearWork`).
        let line = body.map { $0 == 0x0A || $0 == 0x0D ? UInt8(ascii: " ") : $0 }
        var oneLine: [UInt8] = []
        while !line.isEmpty && oneLine.count < 16 << 10 { oneLine += line }
        for page in [body, oneLine] {
            let examined = DirectoryListing.parse(page, base: directory).bytesExamined
            XCTAssertLessThanOrEqual(examined, DirectoryListing.examinedPerByte * page.count + DirectoryListing.examinedSlack,
                                     "\(input): \(page.count) bytes, \(examined) looked at")
        }
    }

    // MARK: Object store answers

    func testObjectListingXMLInputs() throws {
        // The harness's properties: never both a page and an error; an error's fields one trimmed printable line,
        // short; sizes a file can have; a page written back (escaped, then url-encoded as rclone writes it) reads
        // back the same; the first half is no other page.
        try replay("ObjectListingXML") { input, bytes in
            let page = ObjectListingXML.page(bytes)
            let error = ObjectListingXML.error(bytes)
            XCTAssertFalse(page != nil && error != nil, input)
            if let error {
                XCTAssertFalse(error.code.isEmpty, input)
                XCTAssertLessThanOrEqual(error.code.unicodeScalars.count, ObjectListingXML.codeLimit, input)
                for field in [error.code, error.message, error.bucket, error.key, error.resource, error.region] {
                    guard let field else { continue }
                    XCTAssertFalse(field.unicodeScalars.contains { ObjectListingXML.isUnprintable($0) },
                                   "\(input): \(field.debugDescription)")
                    XCTAssertLessThanOrEqual(field.unicodeScalars.count, ObjectListingXML.fieldLimit, input)
                    XCTAssertFalse(field.hasPrefix(" ") || field.hasSuffix(" "), "\(input): \(field.debugDescription)")
                }
            }
            guard let page else { return }
            for object in page.objects {
                if let size = object.size { XCTAssertLessThanOrEqual(size, UInt64(Int64.max), input) }
            }
            for urlEncoded in [false, true] {
                XCTAssertEqual(ObjectListingXML.page(listingXML(page, urlEncoded: urlEncoded)), page,
                               "\(input): written back, url \(urlEncoded)")
            }
            let half = ObjectListingXML.page(Array(bytes[..<(bytes.count / 2)]))
            XCTAssertTrue(half == nil || half == page, input)
        }
        // The seeds are real answers (rclone's and moto's pages, moto's SignatureDoesNotMatch): the properties
        // above held on pages, not only on refusals.
        let seeds = try inputs("seeds", of: "ObjectListingXML")
        XCTAssertEqual(seeds.filter { ObjectListingXML.page($0.bytes)?.objects.isEmpty == false }.count, 4)
        XCTAssertEqual(seeds.filter { ObjectListingXML.error($0.bytes)?.code == "SignatureDoesNotMatch" }.count, 1)
    }

    /// `page` as a ListBucketResult, as the ObjectListingXML harness writes it: text escaped (a CR as `&#13;`, which
    /// XML does not read as LF); with `urlEncoded`, keys and prefixes percent-encoded with a space as `+`.
    private func listingXML(_ page: ObjectListingPage, urlEncoded: Bool) -> [UInt8] {
        func escaped(_ text: String) -> String {
            var out = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "&": out += "&amp;"
                case "<": out += "&lt;"
                case ">": out += "&gt;"
                case "\r": out += "&#13;"
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out
        }
        func key(_ text: String) -> String {
            guard urlEncoded else { return escaped(text) }
            var out = ""
            for byte in text.utf8 {
                if byte == UInt8(ascii: " ") {
                    out += "+"
                } else if (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    out += cFormat("%%%02X", byte)
                }
            }
            return out
        }
        var xml = "<ListBucketResult><IsTruncated>\(page.isTruncated)</IsTruncated>"
        if let prefix = page.prefix { xml += "<Prefix>\(key(prefix))</Prefix>" }
        if let delimiter = page.delimiter { xml += "<Delimiter>\(key(delimiter))</Delimiter>" }
        if let startAfter = page.startAfter { xml += "<StartAfter>\(key(startAfter))</StartAfter>" }
        if let token = page.continuationToken { xml += "<ContinuationToken>\(escaped(token))</ContinuationToken>" }
        for object in page.objects {
            xml += "<Contents><Key>\(key(object.key))</Key>"
            if let date = object.lastModified { xml += "<LastModified>\(escaped(date))</LastModified>" }
            if let etag = object.etag { xml += "<ETag>&quot;\(escaped(etag))&quot;</ETag>" }
            if let size = object.size { xml += "<Size>\(size)</Size>" }
            xml += "</Contents>"
        }
        for prefix in page.commonPrefixes { xml += "<CommonPrefixes><Prefix>\(key(prefix))</Prefix></CommonPrefixes>" }
        if let token = page.nextContinuationToken {
            xml += "<NextContinuationToken>\(escaped(token))</NextContinuationToken>"
        }
        if urlEncoded { xml += "<EncodingType>url</EncodingType>" }
        return Array((xml + "</ListBucketResult>").utf8)
    }

    // MARK: Header values

    func testContentRangeInputs() throws {
        try replay("ContentRange") { input, bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            if let complete = ContentRange(parsing: text)?.completeLength {
                XCTAssertLessThanOrEqual(complete, UInt64(Int64.max), "\(input): more than a file can hold")
            }
            if let parsed = ContentRange(parsing: text), let range = parsed.range {
                XCTAssertFalse(range.isEmpty, input)
                if let complete = parsed.completeLength { XCTAssertLessThanOrEqual(range.upperBound, complete, input) }
            }
            if let time = HTTPDate.parse(text), (-62_167_219_200..<253_402_300_800).contains(time) {
                XCTAssertEqual(HTTPDate.parse(HTTPDate.format(time)), time,
                               "\(input): \(time) as \(HTTPDate.format(time))")
            }
            if let name = ContentDisposition.filename(from: text) { XCTAssertFalse(name.isEmpty, input) }
        }
    }

    func testResponseHeadChecksInputs() throws {
        // The harness's framing: a byte for the status, one for whether a range was asked, the range as two
        // little-endian UInt64s (at most 2^40), then header lines. Its properties, for the checks a body passes.
        try replay("ResponseHeadChecks", regressions: false) { input, bytes in
            guard bytes.count >= 18 else { return }
            let status = [200, 206, 416, 503][Int(bytes[0] % 4)]
            func number(_ at: Int) -> UInt64 {
                bytes[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } % (1 << 40)
            }
            let (first, second) = (number(2), number(10))
            let asked: Range<UInt64>? = bytes[1] % 2 == 0 || first == second
                ? nil : min(first, second)..<max(first, second)
            var headers: [String: String] = [:]
            for line in String(decoding: bytes[18...], as: UTF8.self).split(whereSeparator: \.isNewline) {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingWhitespace()
            }
            let head = ResponseHead(status: status, headers: headers)
            if case .part(let contentRange) = head.carriedBytes(asked: asked), let asked, contentRange.fits(asked),
               let range = contentRange.range {
                XCTAssertTrue(range.lowerBound == asked.lowerBound && range.upperBound <= asked.upperBound, input)
            }
            let length = asked.map { UInt64($0.count) }
            guard head.untrustedBody(expectedLength: length) == nil else { return }
            XCTAssertNil(head.foreignEncoding, input)
            XCTAssertFalse(length != nil && headers["content-type"]?.lowercased().hasPrefix("multipart/") ?? false,
                           "\(input): a multipart body is not the range asked for")
            if let length, head.statesItsLength { XCTAssertEqual(UInt64(headers["content-length"] ?? ""), length, input) }
        }
    }

    func testHTTPDatesKeepFourDigitYears() {
        // Found by the ContentRange and listing fuzzers: year 26 was written "26" and read back as 2026.
        let year26 = HTTPDate.daysSinceEpoch(year: 26, month: 11, day: 23) * 86_400 + 36_000
        XCTAssertEqual(HTTPDate.format(year26), "Mon, 23 Nov 0026 10:00:00 GMT")
        XCTAssertEqual(HTTPDate.parse("Mon, 23 Nov 0026 10:00:00 GMT"), year26)
        XCTAssertEqual(HTTPDate.parse("Mon Nov 23 10:00:00 0026"), year26)
        // RFC 850's two-digit years keep their meaning.
        XCTAssertEqual(HTTPDate.parse("Monday, 23-Nov-26 10:00:00 GMT"),
                       HTTPDate.parse("Mon, 23 Nov 2026 10:00:00 GMT"))
    }

    // MARK: Cache records

    func testMetaBlockInputs() throws {
        // The seeds are hand-made records of each kind (a meta block with two slots, a new one, a slot, a footer);
        // the harness checks them through the same function. The regression: a slot with bits past its last block
        // decoded, without them.
        try replay("MetaBlock") { input, bytes in
            XCTAssertNil(metaBlockPropertyBroken(bytes), input)
        }
        let seed = try XCTUnwrap(try inputs("seeds", of: "MetaBlock").first { $0.0 == "meta-block-small" }?.1)
        let meta = try MetaBlock.decode(Array(seed.dropFirst()))
        XCTAssertEqual(meta.slot?.sequence, 2, "the valid slot with the higher sequence counts")
        XCTAssertEqual(meta.header.answeredAt, 1_700_000_000)
    }

    func testListingRecordsInputs() throws {
        // The seeds: a whole records file, the same records framed by the harness, a cut file, records a listing
        // refuses (a slash, "..", a name twice), and files a listing adds whole. The harness's framing seals the
        // rest with a trailer.
        try replay("ListingRecords") { input, bytes in
            XCTAssertNil(listingRecordsPropertyBroken(bytes), input)
            checkListing(listingRecordsFramed(bytes), input)
        }
        let seeds = Dictionary(uniqueKeysWithValues: try inputs("seeds", of: "ListingRecords"))
        let whole = DirectoryListing.parse(listingRecordsFramed(try XCTUnwrap(seeds["whole-file"])),
                                           base: "http://example.org/pub/data/")
        XCTAssertEqual(whole.entries.map(\.name), ["photos", "a b.txt", "old.bin", "ünïcode"])
        XCTAssertEqual(whole.entries.map(\.size), [nil, 1234, 0, 1 << 40])
        let framed = DirectoryListing.parse(listingRecordsFramed(try XCTUnwrap(seeds["framed-4-records"])),
                                            base: "http://example.org/pub/data/")
        XCTAssertEqual(framed.entries, whole.entries, "the harness's framing makes the same file")
        XCTAssertTrue(DirectoryListing.isDamagedRecords(listingRecordsFramed(try XCTUnwrap(seeds["cut-file"]))))
        let refused = DirectoryListing.parse(listingRecordsFramed(try XCTUnwrap(seeds["framed-refused-names"])),
                                             base: "http://example.org/pub/data/")
        XCTAssertEqual(refused.entries.map(\.name), ["dup"], "a slash, '..' and a second 'dup' are left out")
        // Files only, plainly named, in name order: a listing added whole (PlainListing), as the rules read it.
        let plain = listingRecordsFramed(try XCTUnwrap(seeds["framed-plain-files"]))
        XCTAssertEqual(PlainListing(records: plain)?.count, 4)
        XCTAssertEqual(DirectoryListing.parse(plain, base: "http://example.org/pub/data/").entries.map(\.name),
                       ["a.jpg", "b c.jpg", "photo-0000001.jpg", "x-é.txt"])
    }

    func testCacheRecordsInputs() throws {
        // The harness's framing: the first byte picks the record; the rest is read as it is and sealed with its CRC.
        try replay("CacheRecords") { input, bytes in
            guard let kind = bytes.first else { return }
            let file = Array(bytes.dropFirst())
            var sealed = file
            withUnsafeBytes(of: CRC32C.checksum(file[...]).littleEndian) { sealed.append(contentsOf: $0) }
            for record in [file, sealed] {
                switch kind % 4 {
                case 0:
                    if let header = try? CacheHeader.decode(record) {
                        XCTAssertEqual(header.encoded(), record, "\(input): header \(header)")
                        // What opening the entry computes first; it trapped on a size near 2^64.
                        XCTAssertLessThanOrEqual(header.size, UInt64(Int64.max), input)
                        XCTAssertGreaterThanOrEqual(header.blockCount, 0, input)
                    }
                case 1:
                    if let bitmap = try? BitmapRecord.decode(record) {
                        XCTAssertEqual(try? BitmapRecord.decode(bitmap.encoded()), bitmap, input)
                    }
                case 2:
                    if let stream = try? StreamRecord.decode(record) { XCTAssertEqual(stream.encoded(), record, input) }
                default:
                    if let digest = try? DigestRecord.decode(record) {
                        XCTAssertEqual(try? DigestRecord.decode(digest.encoded()), digest, input)
                    }
                }
            }
        }
    }

    func testARecordWithBytesAfterItsFieldsIsRefused() throws {
        // Found by the CacheRecords fuzzer: a header with bytes after its last field (under a matching CRC) was
        // read as if they were not there.
        let header = CacheHeader(blockSize: 65_536, size: 1000, generation: 7, url: "http://h/f", etag: "\"e\"",
                                 lastModified: "")
        var padded = Array(header.encoded().dropLast(4)) + [0, 0, 0, 0]
        withUnsafeBytes(of: CRC32C.checksum(padded[...]).littleEndian) { padded.append(contentsOf: $0) }
        XCTAssertThrowsError(try CacheHeader.decode(padded)) { error in
            XCTAssertEqual(error as? FormatError, .inconsistent("4 bytes after the last field"))
        }
        XCTAssertEqual(try CacheHeader.decode(header.encoded()), header)
    }
}
