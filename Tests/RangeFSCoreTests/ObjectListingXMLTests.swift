@testable import RangeFSCatalog
import XCTest
@testable import RangeFSObjectStore

/// Issue 38's ListObjectsV2 pages and S3 error bodies (`ObjectListingXML`, read by `ShallowXML`). The fixtures are
/// AWS's documented examples (S3 API reference, ListObjectsV2, examples 1, 3 and 4) and excerpts of what rclone
/// serve s3 1.75.2 and moto 5.2.5 answered on this machine (/work/notes/s3servers38.md §3).
final class ObjectListingXMLTests: XCTestCase {
    func page(_ text: String) -> ObjectListingPage? { ObjectListingXML.page(Array(text.utf8)) }

    func object(_ key: String, _ size: UInt64?, _ etag: String?, _ date: String?) -> ObjectListingPage.Object {
        ObjectListingPage.Object(key: key, size: size, etag: etag, lastModified: date)
    }

    // MARK: AWS's examples

    func testAWSExampleListingKeys() {
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
            <Name>bucket</Name>
            <Prefix/>
            <KeyCount>205</KeyCount>
            <MaxKeys>1000</MaxKeys>
            <IsTruncated>false</IsTruncated>
            <Contents>
                <Key>my-image.jpg</Key>
                <LastModified>2009-10-12T17:50:30.000Z</LastModified>
                <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>
                <Size>434234</Size>
                <StorageClass>STANDARD</StorageClass>
            </Contents>
        </ListBucketResult>
        """
        var expected = ObjectListingPage()
        expected.objects = [object("my-image.jpg", 434_234, "fba9dede5f27731c9771645a39863328",
                                   "2009-10-12T17:50:30.000Z")]
        expected.prefix = ""  // `<Prefix/>`: an empty element
        XCTAssertEqual(page(answer), expected)
    }

    func testAWSExampleWithPrefixAndDelimiterGivesCommonPrefixesAndTheMarkerObject() {
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>example-bucket</Name>
          <Prefix>photos/2006/</Prefix>
          <KeyCount>3</KeyCount>
          <MaxKeys>1000</MaxKeys>
          <Delimiter>/</Delimiter>
          <IsTruncated>false</IsTruncated>
          <Contents>
            <Key>photos/2006/</Key>
            <LastModified>2016-04-30T23:51:29.000Z</LastModified>
            <ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag>
            <Size>0</Size>
            <StorageClass>STANDARD</StorageClass>
          </Contents>

          <CommonPrefixes>
            <Prefix>photos/2006/February/</Prefix>
          </CommonPrefixes>
          <CommonPrefixes>
            <Prefix>photos/2006/January/</Prefix>
          </CommonPrefixes>
        </ListBucketResult>
        """
        let listed = page(answer)
        XCTAssertEqual(listed?.objects, [object("photos/2006/", 0, "d41d8cd98f00b204e9800998ecf8427e",
                                                "2016-04-30T23:51:29.000Z")])
        XCTAssertEqual(listed?.commonPrefixes, ["photos/2006/February/", "photos/2006/January/"])
        XCTAssertEqual(listed?.prefix, "photos/2006/")
        XCTAssertEqual(listed?.delimiter, "/")
        XCTAssertEqual(listed?.isTruncated, false)
    }

    func testAWSExampleOfATruncatedPageGivesItsContinuationToken() {
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>bucket</Name>
          <Prefix></Prefix>
          <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
          <KeyCount>1000</KeyCount>
          <MaxKeys>1000</MaxKeys>
          <IsTruncated>true</IsTruncated>
          <Contents>
            <Key>happyface.jpg</Key>
            <LastModified>2014-11-21T19:40:05.000Z</LastModified>
            <ETag>&quot;70ee1738b6b21e2c8a43f3a5ab0eee71&quot;</ETag>
            <Size>11</Size>
            <StorageClass>STANDARD</StorageClass>
          </Contents>
        </ListBucketResult>
        """
        let listed = page(answer)
        XCTAssertEqual(listed?.isTruncated, true)
        XCTAssertEqual(listed?.nextContinuationToken, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        XCTAssertEqual(listed?.objects.map(\.key), ["happyface.jpg"])
        XCTAssertEqual(listed?.objects.first?.etag, "70ee1738b6b21e2c8a43f3a5ab0eee71")
    }

    // MARK: rclone serve s3 and moto

    /// rclone's answer to `prefix=data/&delimiter=/`: pretty-printed, CommonPrefixes first, ETags unquoted, dates
    /// with 2 or 3 fraction digits, keys XML-escaped only.
    let rclonePage = """
    <?xml version="1.0" encoding="UTF-8"?>
    <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
      <Name>bkt</Name>
      <IsTruncated>false</IsTruncated>
      <Delimiter>/</Delimiter>
      <Prefix>data/</Prefix>
      <MaxKeys>1000</MaxKeys>
      <CommonPrefixes>
        <Prefix>data/sub/</Prefix>
      </CommonPrefixes>
      <Contents>
        <Key>data/50%.txt</Key>
        <LastModified>2026-11-26T04:12:53.432Z</LastModified>
        <ETag>1f8fb7a349713d2058975957d01bf06d</ETag>
        <Size>12</Size>
        <StorageClass>STANDARD</StorageClass>
      </Contents>
      <Contents>
        <Key>data/a+b.txt</Key>
        <LastModified>2026-11-26T04:12:53.432Z</LastModified>
        <ETag>c9e8c23207260e125280870fc9b2aad2</ETag>
        <Size>12</Size>
        <StorageClass>STANDARD</StorageClass>
      </Contents>
      <Contents>
        <Key>data/tilde~(x)=y&amp;z.txt</Key>
        <LastModified>2026-11-26T04:12:53.433Z</LastModified>
        <ETag>fa634e818f99cceacd0becbd9f01370c</ETag>
        <Size>22</Size>
        <StorageClass>STANDARD</StorageClass>
      </Contents>
      <Contents>
        <Key>data/ünï cödé.txt</Key>
        <LastModified>2026-11-26T04:12:53.43Z</LastModified>
        <ETag>0c737477644c210a4f89d998e51ca8aa</ETag>
        <Size>21</Size>
        <StorageClass>STANDARD</StorageClass>
      </Contents>
      <KeyCount>5</KeyCount>
    </ListBucketResult>
    """

    var rcloneObjects: [ObjectListingPage.Object] {
        [object("data/50%.txt", 12, "1f8fb7a349713d2058975957d01bf06d", "2026-11-26T04:12:53.432Z"),
         object("data/a+b.txt", 12, "c9e8c23207260e125280870fc9b2aad2", "2026-11-26T04:12:53.432Z"),
         object("data/tilde~(x)=y&z.txt", 22, "fa634e818f99cceacd0becbd9f01370c", "2026-11-26T04:12:53.433Z"),
         object("data/ünï cödé.txt", 21, "0c737477644c210a4f89d998e51ca8aa", "2026-11-26T04:12:53.43Z")]
    }

    func testRclonePageReadsKeysAsWrittenWithoutEncodingType() {
        var expected = ObjectListingPage()
        expected.objects = rcloneObjects
        expected.commonPrefixes = ["data/sub/"]
        expected.prefix = "data/"
        expected.delimiter = "/"
        // `%` and `+` in a key are themselves when the answer is not url-encoded.
        XCTAssertEqual(page(rclonePage), expected)
    }

    func testRcloneURLEncodedPageDecodesPlusAsSpaceAndPercentEscapes() {
        // rclone's answer with encoding-type=url (Go's QueryEscape): space as `+`, `+` as `%2B`, `~` as `%7E`.
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>bkt</Name>
          <IsTruncated>false</IsTruncated>
          <Delimiter>/</Delimiter>
          <Prefix>data/</Prefix>
          <CommonPrefixes>
            <Prefix>data/sub/</Prefix>
          </CommonPrefixes>
          <Contents>
            <Key>data/50%25.txt</Key>
            <LastModified>2026-11-26T04:12:53.432Z</LastModified>
            <ETag>1f8fb7a349713d2058975957d01bf06d</ETag>
            <Size>12</Size>
          </Contents>
          <Contents>
            <Key>data/a+b.txt</Key>
            <ETag>1da97dea82eb6c17a94e7c6b5cc52b88</ETag>
            <Size>12</Size>
          </Contents>
          <Contents>
            <Key>data/a%2Bb.txt</Key>
            <ETag>c9e8c23207260e125280870fc9b2aad2</ETag>
            <Size>12</Size>
          </Contents>
          <Contents>
            <Key>data/tilde%7E%28x%29%3Dy%26z.txt</Key>
            <Size>22</Size>
          </Contents>
          <Contents>
            <Key>data/%C3%BCn%C3%AF+c%C3%B6d%C3%A9.txt</Key>
            <Size>21</Size>
          </Contents>
          <EncodingType>url</EncodingType>
          <KeyCount>6</KeyCount>
        </ListBucketResult>
        """
        let listed = page(answer)
        XCTAssertEqual(listed?.objects.map(\.key),
                       ["data/50%.txt", "data/a b.txt", "data/a+b.txt", "data/tilde~(x)=y&z.txt",
                        "data/ünï cödé.txt"])
        XCTAssertEqual(listed?.commonPrefixes, ["data/sub/"])
        XCTAssertEqual(listed?.objects.first?.lastModified, "2026-11-26T04:12:53.432Z")
    }

    func testMotoPageWithRawQuotedETagsAndPercent20() {
        // moto's answer with encoding-type=url, on one line, Contents first, ETags in raw quotes, space as %20.
        let answer = """
        <?xml version="1.0" encoding="utf-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>\
        <Contents><Key>data/a%20b.txt</Key><LastModified>2026-11-26T04:12:53.000Z</LastModified>\
        <ETag>"1da97dea82eb6c17a94e7c6b5cc52b88"</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>\
        <Contents><Key>data/a%2Bb.txt</Key><LastModified>2026-11-26T04:12:53.000Z</LastModified>\
        <ETag>"c9e8c23207260e125280870fc9b2aad2"</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>\
        <Contents><Key>data/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9.txt</Key>\
        <LastModified>2026-11-26T04:12:53.000Z</LastModified>\
        <ETag>"0c737477644c210a4f89d998e51ca8aa"</ETag><Size>21</Size><StorageClass>STANDARD</StorageClass></Contents>\
        <Name>bkt</Name><Prefix>data/</Prefix><Delimiter>/</Delimiter><MaxKeys>1000</MaxKeys>\
        <CommonPrefixes><Prefix>data/k/</Prefix></CommonPrefixes>\
        <CommonPrefixes><Prefix>data/sub/</Prefix></CommonPrefixes>\
        <EncodingType>url</EncodingType><KeyCount>5</KeyCount></ListBucketResult>
        """
        var expected = ObjectListingPage()
        expected.objects = [
            object("data/a b.txt", 12, "1da97dea82eb6c17a94e7c6b5cc52b88", "2026-11-26T04:12:53.000Z"),
            object("data/a+b.txt", 12, "c9e8c23207260e125280870fc9b2aad2", "2026-11-26T04:12:53.000Z"),
            object("data/ünï cödé.txt", 21, "0c737477644c210a4f89d998e51ca8aa", "2026-11-26T04:12:53.000Z"),
        ]
        expected.commonPrefixes = ["data/k/", "data/sub/"]
        expected.prefix = "data/"
        expected.delimiter = "/"
        XCTAssertEqual(page(answer), expected)
    }

    func testTruncatedPagesOfBothServersGiveTheirTokens() {
        // rclone: a base64 token (with `=`), echoed on the next page; moto: hex, not echoed.
        let rclone = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>bkt</Name>
          <IsTruncated>true</IsTruncated>
          <Prefix>page/</Prefix>
          <MaxKeys>2</MaxKeys>
          <Contents>
            <Key>page/p2</Key>
            <LastModified>2026-11-26T04:12:53.437Z</LastModified>
            <ETag>9dd4e461268c8034f5c8564e155c67a6</ETag>
            <Size>1</Size>
            <StorageClass>STANDARD</StorageClass>
          </Contents>
          <ContinuationToken>cGFnZS9wMQ==</ContinuationToken>
          <KeyCount>1</KeyCount>
          <NextContinuationToken>cGFnZS9wMw==</NextContinuationToken>
        </ListBucketResult>
        """
        let moto = """
        <?xml version="1.0" encoding="utf-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true</IsTruncated><Contents>\
        <Key>page/p0</Key><LastModified>2026-11-26T04:12:53.000Z</LastModified>\
        <ETag>"9dd4e461268c8034f5c8564e155c67a6"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>\
        <Name>bkt</Name><Prefix>page/</Prefix><MaxKeys>2</MaxKeys><KeyCount>1</KeyCount>\
        <NextContinuationToken>e68a608c3fe0daae6d818af66956661a</NextContinuationToken></ListBucketResult>
        """
        XCTAssertEqual(page(rclone)?.isTruncated, true)
        XCTAssertEqual(page(rclone)?.continuationToken, "cGFnZS9wMQ==")
        XCTAssertEqual(page(rclone)?.nextContinuationToken, "cGFnZS9wMw==")
        XCTAssertEqual(page(moto)?.isTruncated, true)
        XCTAssertNil(page(moto)?.continuationToken)
        XCTAssertEqual(page(moto)?.nextContinuationToken, "e68a608c3fe0daae6d818af66956661a")
        XCTAssertEqual(page(moto)?.objects, [object("page/p0", 1, "9dd4e461268c8034f5c8564e155c67a6",
                                                    "2026-11-26T04:12:53.000Z")])
    }

    func testEmptyResultAndCommonPrefixesOnly() {
        // rclone's answer for an empty prefix: no KeyCount, no Contents.
        let empty = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>bkt</Name>
          <IsTruncated>false</IsTruncated>
          <Prefix>nothing/</Prefix>
          <MaxKeys>1000</MaxKeys>
        </ListBucketResult>
        """
        var expected = ObjectListingPage()
        expected.prefix = "nothing/"
        XCTAssertEqual(page(empty), expected)
        let folders = """
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name>\
        <IsTruncated>false</IsTruncated><Prefix></Prefix><Delimiter>/</Delimiter><CommonPrefixes><Prefix>a/</Prefix>\
        </CommonPrefixes><CommonPrefixes><Prefix>b c/</Prefix></CommonPrefixes></ListBucketResult>
        """
        XCTAssertEqual(page(folders)?.objects, [])
        XCTAssertEqual(page(folders)?.commonPrefixes, ["a/", "b c/"])
    }
}
