@testable import RangeFSCatalog
@testable import RangeFSSystem
import XCTest
@testable import RangeFSObjectStore

/// Issue 38: the fields of a ListObjectsV2 page one by one (ETag quotes, sizes, url-encoded keys, fields that refuse
/// a page) and S3's `<Error>` bodies as AWS, rclone serve s3 and moto write them.
final class ObjectListingFieldTests: XCTestCase {
    /// A page of one object whose Contents holds `fields`, with `extra` elements after it.
    func page(contents fields: String, extra: String = "") -> ObjectListingPage? {
        let answer = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>\
        <Contents>\(fields)</Contents>\(extra)</ListBucketResult>
        """
        return ObjectListingXML.page(Array(answer.utf8))
    }

    func error(_ text: String) -> ObjectStoreErrorBody? { ObjectListingXML.error(Array(text.utf8)) }

    // MARK: ETags

    func testETagsLoseTheirQuotesHoweverTheyAreWritten() {
        let etag = "70ee1738b6b21e2c8a43f3a5ab0eee71"
        for written in ["&quot;\(etag)&quot;", "\"\(etag)\"", etag, "&#34;\(etag)&#x22;", "&#x22;\(etag)&#34;"] {
            XCTAssertEqual(page(contents: "<Key>k</Key><ETag>\(written)</ETag>")?.objects.first?.etag, etag, written)
        }
        // A multipart ETag keeps its part count; an empty one is no ETag.
        XCTAssertEqual(page(contents: "<Key>k</Key><ETag>\"\(etag)-12\"</ETag>")?.objects.first?.etag, "\(etag)-12")
        XCTAssertNil(page(contents: "<Key>k</Key><ETag>\"\"</ETag>")?.objects.first?.etag)
        XCTAssertNil(page(contents: "<Key>k</Key>")?.objects.first?.etag)
        // Only one pair of quotes goes, and only a pair: a lone quote is part of the value.
        XCTAssertEqual(page(contents: "<Key>k</Key><ETag>\"\"x\"\"</ETag>")?.objects.first?.etag, "\"x\"")
        XCTAssertEqual(page(contents: "<Key>k</Key><ETag>\"x</ETag>")?.objects.first?.etag, "\"x")
        // Quotes are matched by bytes, not Characters: after a combining mark the value does not end in a quote.
        XCTAssertEqual(page(contents: "<Key>k</Key><ETag>\"x\"\u{301}</ETag>")?.objects.first?.etag, "\"x\"\u{301}")
    }

    // MARK: Sizes

    func testSizesAreDecimalNumbersAFileCanHave() {
        func size(_ written: String) -> UInt64?? {
            page(contents: "<Key>k</Key><Size>\(written)</Size>")?.objects.first?.size
        }
        XCTAssertEqual(size("0"), .some(0))
        XCTAssertEqual(size("3893"), .some(3893))
        XCTAssertEqual(size(" 12\n"), .some(12))
        XCTAssertEqual(size("9223372036854775807"), .some(UInt64(Int64.max)))
        for garbage in ["-1", "+1", "12abc", "1.5", "0x10", "", "9223372036854775808", "18446744073709551615",
                        "99999999999999999999999", "１２"] {
            XCTAssertEqual(size(garbage), .some(nil), garbage)  // the object is listed, without a size
        }
    }

    // MARK: url encoding

    func testURLEncodingDecodesKeysPrefixesAndEchoesButNotTokens() {
        let extra = """
        <CommonPrefixes><Prefix>a%20b/</Prefix></CommonPrefixes><CommonPrefixes><Prefix>c+d/</Prefix></CommonPrefixes>\
        <Prefix>p%2F+q</Prefix><Delimiter>%2F</Delimiter><StartAfter>s%2Bt</StartAfter>\
        <NextContinuationToken>a%2Bb+c=</NextContinuationToken><EncodingType>url</EncodingType>
        """
        let listed = page(contents: "<Key>%E2%9C%93%20%F0%9F%98%80+%2B%25%26</Key>", extra: extra)
        XCTAssertEqual(listed?.objects.first?.key, "✓ 😀 +%&")
        XCTAssertEqual(listed?.commonPrefixes, ["a b/", "c d/"])
        XCTAssertEqual(listed?.prefix, "p/ q")
        XCTAssertEqual(listed?.delimiter, "/")
        XCTAssertEqual(listed?.startAfter, "s+t")
        // Tokens are opaque: they go back as they came.
        XCTAssertEqual(listed?.nextContinuationToken, "a%2Bb+c=")
        // EncodingType may come first or last, in any case, and with white space.
        let first = "<ListBucketResult><EncodingType> URL </EncodingType><Contents><Key>a+b</Key></Contents>"
            + "</ListBucketResult>"
        XCTAssertEqual(ObjectListingXML.page(Array(first.utf8))?.objects.first?.key, "a b")
    }

    func testURLEncodedKeysThatDoNotDecodeRefuseThePage() {
        let encoding = "<EncodingType>url</EncodingType>"
        for key in ["50%", "50%2", "50%zz", "%FF", "%C3", "%ED%A0%80"] {
            XCTAssertNil(page(contents: "<Key>\(key)</Key>", extra: encoding), key)
        }
        XCTAssertNil(page(contents: "<Key>k</Key>", extra: "<EncodingType>base64</EncodingType>"))
        // Without url encoding, the same keys are what they say.
        XCTAssertEqual(page(contents: "<Key>50%zz</Key>")?.objects.first?.key, "50%zz")
    }

    // MARK: Fields that refuse a page

    func testAPageWithAmbiguousFieldsIsRefused() {
        XCTAssertNil(page(contents: "<Size>1</Size>"), "a Contents without a Key")
        XCTAssertNil(page(contents: "<Key>a</Key><Key>b</Key>"), "a Key given twice")
        XCTAssertNil(page(contents: "<Key>a<b/>c</Key>"), "a Key holding an element")
        XCTAssertNil(page(contents: "<Key>a</Key>", extra: "<IsTruncated>true</IsTruncated>"), "IsTruncated twice")
        let maybe = "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>"
        XCTAssertNil(ObjectListingXML.page(Array(maybe.utf8)), "IsTruncated neither true nor false")
        XCTAssertNil(page(contents: "<Key>a</Key>", extra: "<EncodingType>url<x/></EncodingType>"), "markup in a flag")
        XCTAssertNil(page(contents: "<Key>&#xD800;</Key>"), "a reference to a surrogate")
        var notUTF8 = Array("<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>".utf8)
        notUTF8[33] = 0xFF
        XCTAssertNil(ObjectListingXML.page(notUTF8), "a key that is not UTF-8")
        // Elements inside Owner or other unknown elements are not the object's fields.
        let owned = page(contents: "<Key>k</Key><Owner><ID>x</ID><Key>not this</Key></Owner><Size>5</Size>")
        XCTAssertEqual(owned?.objects.first?.key, "k")
        XCTAssertEqual(owned?.objects.first?.size, 5)
    }

    func testOtherRootsAreNotPages() {
        let buckets = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>fe7272ea58be830e56fe1663b1\
        0fafef</ID><DisplayName>GoFakeS3</DisplayName></Owner><Buckets><Bucket><Name>bkt</Name></Bucket></Buckets>\
        </ListAllMyBucketsResult>
        """
        guard case .failure(let problem) = ObjectListingXML.read(Array(buckets.utf8)) else {
            return XCTFail("ListAllMyBucketsResult read as a page")
        }
        XCTAssertEqual(problem.description, "the answer is <ListAllMyBucketsResult>, not a ListBucketResult")
        XCTAssertNil(error(buckets))
    }

    // MARK: Error bodies

    func testSignatureDoesNotMatchFromRcloneMotoAndAWS() {
        let message = "The request signature we calculated does not match the signature you provided. "
            + "Check your key and signing method."
        let rclone = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error><Code>SignatureDoesNotMatch</Code><Message>\(message)</Message></Error>
        """
        XCTAssertEqual(error(rclone), ObjectStoreErrorBody(code: "SignatureDoesNotMatch", message: message))
        let moto = """
        <?xml version="1.0" encoding="utf-8"?>
        <Error><Code>SignatureDoesNotMatch</Code><Message>\(message)</Message><BucketName>bkt</BucketName>\
        <RequestId>4J4UMxljlAwY2ZStd7xedetDin0zXU6zOBOFHdzgjVeBnoBgHYvj</RequestId>\
        <HostId>9Gjjt1m+cjU4OPvX9O9/8RuvnG41MRb/18Oux2o5H5MY7ISNTlXN+Dz9IG62/ILVxhAGI0qyPfg=</HostId></Error>
        """
        XCTAssertEqual(error(moto),
                       ObjectStoreErrorBody(code: "SignatureDoesNotMatch", message: message, bucket: "bkt"))
        // AWS adds the string to sign and the canonical request, which hold the signed headers (a session token
        // among them): they are not kept.
        let aws = """
        <Error><Code>SignatureDoesNotMatch</Code><Message>\(message)</Message><AWSAccessKeyId>AKIDEXAMPLE\
        </AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256</StringToSign><CanonicalRequest>GET
        /
        x-amz-security-token:SESSIONTOKEN</CanonicalRequest><RequestId>1</RequestId></Error>
        """
        let read = error(aws)
        XCTAssertEqual(read, ObjectStoreErrorBody(code: "SignatureDoesNotMatch", message: message))
        XCTAssertFalse(String(describing: read).contains("SESSIONTOKEN"))
    }

    func testAccessDeniedNoSuchBucketAndNoSuchKey() {
        // AWS's usual AccessDenied; rclone's answer to a request dated more than 15 minutes ago.
        let aws = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>4442587FB7D0A2F9</RequestId>\
        <HostId>9Gjjt1m+cjU4OPvX9O9/8RuvnG41MRb/18Oux2o5H5MY7ISNTlXN+Dz9IG62/ILVxhAGI0qyPfg=</HostId></Error>
        """
        XCTAssertEqual(error(aws), ObjectStoreErrorBody(code: "AccessDenied", message: "Access Denied"))
        let skewed = "The difference between the request time and the server's time exceeds the maximum allowed."
        let rclone = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error><Code>AccessDenied</Code><Message>The difference between the request time and the server&apos;s \
        time exceeds the maximum allowed.</Message></Error>
        """
        XCTAssertEqual(error(rclone), ObjectStoreErrorBody(code: "AccessDenied", message: skewed))
        // rclone, indented, with Resource; moto with BucketName and Key.
        let rcloneBucket = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error>
          <Code>NoSuchBucket</Code>
          <Message>The specified bucket does not exist</Message>
          <Resource>nobkt</Resource>
        </Error>
        """
        XCTAssertEqual(error(rcloneBucket), ObjectStoreErrorBody(code: "NoSuchBucket",
                                                                 message: "The specified bucket does not exist",
                                                                 resource: "nobkt"))
        let motoBucket = """
        <?xml version="1.0" encoding="utf-8"?>
        <Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>\
        <BucketName>nobkt</BucketName><RequestId>dNg4dQSJYZUjWHB13TqaJ6GnSZkixPGIpxLrVO77ienJWlbib2db</RequestId>\
        </Error>
        """
        XCTAssertEqual(error(motoBucket), ObjectStoreErrorBody(code: "NoSuchBucket",
                                                               message: "The specified bucket does not exist",
                                                               bucket: "nobkt"))
        let rcloneKey = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error>
          <Code>NoSuchKey</Code>
          <Resource>data/nope</Resource>
        </Error>
        """
        XCTAssertEqual(error(rcloneKey), ObjectStoreErrorBody(code: "NoSuchKey", resource: "data/nope"))
        let motoKey = """
        <?xml version="1.0" encoding="utf-8"?>
        <Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>data/nope</Key>\
        <RequestId>WgE64oG1XvcQ7VNKlljcX7t2EYaDndTHMW7pNvUEOZRFREDjbmWg</RequestId></Error>
        """
        XCTAssertEqual(error(motoKey), ObjectStoreErrorBody(code: "NoSuchKey",
                                                            message: "The specified key does not exist.",
                                                            key: "data/nope"))
        // AWS names the bucket's region when a request was signed for another one.
        let region = "<Error><Code>AuthorizationHeaderMalformed</Code><Region>eu-west-1</Region></Error>"
        XCTAssertEqual(error(region)?.region, "eu-west-1")
    }

    func testErrorFieldsAreOneLineEach() {
        // Error bodies reach logs and messages: a server's line ends, tabs and escape sequences do not.
        let text = "<Error><Code>\n  AccessDenied\n</Code><Message>Access\r\n\t denied&#10;\u{1B}[31mred&#x7F;"
            + String(repeating: "x", count: 400) + "</Message></Error>"
        let read = error(text)
        XCTAssertEqual(read?.code, "AccessDenied")
        XCTAssertEqual(read?.message, "Access denied [31mred " + String(repeating: "x", count: 278))
        XCTAssertNil(error("<Error><Code>\n\t</Code></Error>"), "a code of white space is none")
    }

    func testWhatIsNotAnErrorBody() {
        // moto's answer to an unsigned list: an HTML page with status 500.
        let html = """
        <!doctype html>
        <html lang=en>
        <title>500 Internal Server Error</title>
        <h1>Internal Server Error</h1>
        """
        XCTAssertNil(error(html))
        XCTAssertNil(error(""))
        XCTAssertNil(error("<Error><Message>no code</Message></Error>"))
        XCTAssertNil(error("<Error><Code>AccessDenied</Code>"), "cut before its end")
        XCTAssertNil(ObjectListingXML.page(Array("<Error><Code>AccessDenied</Code></Error>".utf8)))
    }
}
