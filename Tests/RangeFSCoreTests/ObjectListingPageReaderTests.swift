@testable import RangeFSCatalog
import Foundation
@testable import RangeFSFetch
import XCTest
@testable import RangeFSObjectStore

/// Issue 46: ListObjectsV2 pages read straight to records (ObjectListingPageReader) give the same records as the
/// full reader (ShallowXML's tree, then ObjectListingXML's page), and a page the full reader refuses is never read
/// by the straight one: it gives the page up, and the full reader decides. The pages object stores write are read
/// straight (else the listing's CPU is not cut).
final class ObjectListingPageReaderTests: XCTestCase {
    /// A page as bench/listserver.py writes it (AWS's order: the token before the keys, ETags as `&quot;`).
    static let listserverPage = """
        <?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bench</Name><Prefix>many/</Prefix>\
        <KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>\
        <NextContinuationToken>2</NextContinuationToken><Contents><Key>many/photo-0000000.jpg</Key>\
        <LastModified>2026-11-01T10:00:00.000Z</LastModified><ETag>&quot;cfcd208495d565ef66e7dff9f98764da&quot;</ETag>\
        <Size>1</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>many/photo-0000001.jpg</Key>\
        <LastModified>2026-11-01T10:00:00.000Z</LastModified><ETag>&quot;c4ca4238a0b923820dcc509a6f75849b&quot;</ETag>\
        <Size>1</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>
        """

    /// A url-encoded page as AWS writes it, with a namespace, an owner, folders, a self-closed field and entities.
    static let awsPage = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>d%2F</Prefix>
        <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
        <KeyCount>5</KeyCount><MaxKeys>5</MaxKeys><Delimiter>%2F</Delimiter><EncodingType>url</EncodingType>
        <IsTruncated>true</IsTruncated><StartAfter/>
        <Contents><Key>d%2F</Key><Size>0</Size><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag></Contents>
        <Contents><Key>d%2Fa+b%2B%C3%A9.bin</Key><LastModified>2026-11-26T04:08:04.710Z</LastModified>
        <ETag>&quot;0123&quot;</ETag><Size> 22 </Size><Owner><ID>abc</ID><DisplayName>me</DisplayName></Owner>
        <StorageClass>STANDARD</StorageClass></Contents>
        <Contents><Key>d%2Fx%26y</Key><LastModified>2026-11-26T06:08:04+02:00</LastModified><ETag>""</ETag>
        <Size>18446744073709551615</Size></Contents>
        <Contents><Key>other%2Fz</Key><Size>1</Size></Contents>
        <Contents><Key>d%2Fq&amp;r&lt;s&gt;t&apos;u&quot;v</Key><ETag>"</ETag><Size>x</Size><LastModified/></Contents>
        <CommonPrefixes><Prefix>d%2Fsub%2F</Prefix></CommonPrefixes><CommonPrefixes><Prefix>d%2Fz%2F</Prefix>
        <Prefix>d%2Fzz%2F</Prefix></CommonPrefixes></ListBucketResult>

        """

    /// Pages object stores write are read straight, to the same records as the full reader's.
    func testTheStoresPagesAreReadStraightToTheSameRecords() throws {
        for (name, page, prefix) in [("listserver", Self.listserverPage, "many/"), ("aws", Self.awsPage, "d/")] {
            let bytes = Array(page.utf8)
            var reader = ObjectListingPageReader(prefix: prefix)
            XCTAssertTrue(reader.read(bytes), "\(name): read straight")
            try assertSameAsFullReader(bytes, prefix: prefix, name)
        }
        var reader = ObjectListingPageReader(prefix: "d/")
        XCTAssertTrue(reader.read(Array(Self.awsPage.utf8)))
        XCTAssertEqual(reader.files.map { String(decoding: reader.decoded[$0.name], as: UTF8.self) },
                       ["a b+é.bin", "x&y", "q&r<s>t'u\"v"], "the folder's marker and a key of another prefix left out")
        XCTAssertEqual(reader.files.map(\.size), [22, nil, nil])
        XCTAssertEqual(reader.nextContinuationToken, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        XCTAssertTrue(reader.isTruncated)
        for seed in try XCTUnwrap(FuzzInputs.kept("seeds", of: "ObjectListingXML")) where seed.name.contains("rclone") {
            var reader = ObjectListingPageReader(prefix: "data/")
            XCTAssertTrue(reader.read(seed.bytes), "\(seed.name): rclone's page read straight")
        }
    }

    /// Whatever the straight reader takes, the full reader takes too and reads to the same records: over the
    /// fuzzer's kept pages, pages holding what only the full reader reads, and every cut and many one-byte
    /// changes of a page.
    func testWhatIsReadStraightIsWhatTheFullReaderReads() throws {
        var pages: [(String, [UInt8])] = []
        for folder in ["seeds", "regressions"] {
            pages += try XCTUnwrap(FuzzInputs.kept(folder, of: "ObjectListingXML")).map { ("\(folder)/\($0.name)", $0.bytes) }
        }
        let aws = Self.awsPage
        let variants: [(String, String)] = [
            ("comment", aws.replacingOccurrences(of: "<KeyCount>", with: "<!-- x --><KeyCount>")),
            ("cdata", aws.replacingOccurrences(of: "<Key>d%2Fx%26y", with: "<Key><![CDATA[d%2Fx]]>%26y")),
            ("namespace prefix", aws.replacingOccurrences(of: "<Key>d%2Fx%26y</Key>", with: "<s3:Key>d%2Fx%26y</s3:Key>")),
            ("numeric reference", aws.replacingOccurrences(of: "x%26y", with: "x&#38;y")),
            ("carriage return", aws.replacingOccurrences(of: "x%26y", with: "x\r%26y")),
            ("key twice", aws.replacingOccurrences(of: "<Size>0</Size>", with: "<Key>d%2Fk</Key>")),
            ("token twice", aws.replacingOccurrences(of: "<KeyCount>", with: "<NextContinuationToken>t</NextContinuationToken><KeyCount>")),
            ("no key", aws.replacingOccurrences(of: "<Key>other%2Fz</Key>", with: "")),
            ("truncated maybe", aws.replacingOccurrences(of: "<IsTruncated>true", with: "<IsTruncated>maybe")),
            ("bad escape", aws.replacingOccurrences(of: "x%26y", with: "x%2")),
            ("not utf-8 once decoded", aws.replacingOccurrences(of: "x%26y", with: "x%C3y")),
            ("other encoding", aws.replacingOccurrences(of: "<EncodingType>url", with: "<EncodingType>base64")),
            ("not url-encoded", aws.replacingOccurrences(of: "<EncodingType>url</EncodingType>", with: "")),
            ("encoding after the keys", aws.replacingOccurrences(of: "<EncodingType>url</EncodingType>", with: "")
                .replacingOccurrences(of: "</ListBucketResult>", with: "<EncodingType>url</EncodingType></ListBucketResult>")),
            ("markup in a field", aws.replacingOccurrences(of: "<Size>1</Size>", with: "<Size>1<b/></Size>")),
            ("markup in the token", aws.replacingOccurrences(of: "wM=</Next", with: "wM=<b/></Next")),
            ("mismatched end", aws.replacingOccurrences(of: "</DisplayName>", with: "</Display>")),
            ("error root", "<Error><Code>NoSuchBucket</Code></Error>"),
            ("latin-1 declaration", aws.replacingOccurrences(of: "UTF-8", with: "ISO-8859-1")),
            ("lowercase declaration", aws.replacingOccurrences(of: "UTF-8", with: "utf-8")),
            ("text after the root", aws + "x"),
            ("self-closed root", "<ListBucketResult/>"),
            ("attribute below the root", aws.replacingOccurrences(of: "<Contents>", with: "<Contents a=\"1\">")),
        ]
        pages += variants.map { ($0.0, Array($0.1.utf8)) }
        pages.append(("key not utf-8", Array(Self.listserverPage.utf8).map { $0 == UInt8(ascii: "9") ? 0xFF : $0 }))
        let page = Array(Self.awsPage.utf8)
        for cut in stride(from: 0, to: page.count, by: 7) { pages.append(("cut at \(cut)", Array(page[..<cut]))) }
        pages += FuzzInputs.oneByteChanges(of: page, count: 600, replacements: Array("<>/&;\"' %+=aZ\u{0}\u{0D}".utf8))
        for (name, bytes) in pages {
            for prefix in ["d/", "data/", "many/", ""] { try assertSameAsFullReader(bytes, prefix: prefix, name) }
        }
    }

    /// When the straight reader takes `bytes`, the full reader takes them too and gives the same records and the
    /// same end (truncated, next token).
    private func assertSameAsFullReader(_ bytes: [UInt8], prefix: String, _ name: String) throws {
        var reader = ObjectListingPageReader(prefix: prefix)
        guard reader.read(bytes) else { return }
        let page = try XCTUnwrap(ObjectListingXML.page(bytes), "\(name): read straight, refused by the full reader")
        var straight = (ListingRecords.Writer(), ListingRecords.Writer())
        ObjectListingRecords.write(reader, folders: &straight.0, files: &straight.1)
        var full = (ListingRecords.Writer(), ListingRecords.Writer())
        ObjectListingRecords.write(page, below: prefix, folders: &full.0, files: &full.1)
        XCTAssertEqual(straight.0.bytes, full.0.bytes, "\(name), prefix '\(prefix)': the same folders")
        XCTAssertEqual(straight.1.bytes, full.1.bytes, "\(name), prefix '\(prefix)': the same files")
        XCTAssertEqual(reader.isTruncated, page.isTruncated, name)
        XCTAssertEqual(reader.nextContinuationToken, page.nextContinuationToken, name)
    }
}
