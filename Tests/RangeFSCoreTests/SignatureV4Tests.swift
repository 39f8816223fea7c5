@testable import RangeFSFetch
@testable import RangeFSSystem
import XCTest
@testable import RangeFSObjectStore

/// AWS Signature Version 4 (issue 38) against the values AWS publishes: the SigV4 test suite's get-vanilla and the
/// S3 API reference's single-chunk GET examples, then the canonical forms that decide whether a store agrees.
/// Values marked "independent" were computed with Python's hmac and hashlib over the canonical request written
/// out by hand (the form both test stores accepted, /work/notes/s3servers38.md §3.5).
final class SignatureV4Tests: XCTestCase {
    private typealias Header = (name: String, value: String)
    private let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// The key of the S3 API reference's examples.
    private let exampleKey = ObjectStoreKey(accessKeyID: "AKIAIOSFODNN7EXAMPLE",
                                            secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    /// 2013-05-24T00:00:00Z, the S3 examples' time.
    private let exampleTime: Int64 = 1_369_353_600

    private func value(_ name: String, in headers: [Header]) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    private func sha256(_ text: String) -> String {
        let hasher = DigestHasher(.sha256)
        hasher.update(Array(text.utf8))
        return hasher.finish().hex
    }

    func testGetVanillaOfTheAWSTestSuite() {
        let key = ObjectStoreKey(accessKeyID: "AKIDEXAMPLE",
                                 secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        let canonical = SignatureV4.canonicalRequest(
            method: "GET", url: "https://example.amazonaws.com/",
            headers: [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")], payloadHash: emptyHash)
        XCTAssertEqual(canonical.text, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                       + "host;x-amz-date\n" + emptyHash)
        XCTAssertEqual(sha256(canonical.text), "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")
        // 2015-08-30T12:36:00Z. Service "service" is not S3, so no x-amz-content-sha256 is added or signed.
        let headers = SignatureV4.headers(method: "GET", url: "https://example.amazonaws.com/", headers: [], key: key,
                                          region: "us-east-1", service: "service", time: 1_440_938_160,
                                          payloadHash: emptyHash)
        XCTAssertEqual(headers.map(\.name), ["Host", "x-amz-date", "Authorization"])
        XCTAssertEqual(value("host", in: headers), "example.amazonaws.com")
        XCTAssertEqual(value("x-amz-date", in: headers), "20150830T123600Z")
        XCTAssertEqual(value("authorization", in: headers),
                       "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                       + "SignedHeaders=host;x-amz-date, "
                       + "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }

    func testS3ReferenceGetObjectWithARange() {
        let url = "https://examplebucket.s3.amazonaws.com/test.txt"
        let headers = SignatureV4.headers(method: "GET", url: url, headers: [("Range", "bytes=0-9")], key: exampleKey,
                                          region: "us-east-1", service: "s3", time: exampleTime,
                                          payloadHash: emptyHash)
        XCTAssertEqual(headers.map(\.name), ["Host", "x-amz-date", "x-amz-content-sha256", "Authorization"])
        XCTAssertEqual(value("x-amz-content-sha256", in: headers), emptyHash)
        XCTAssertEqual(value("authorization", in: headers),
                       "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                       + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                       + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        // The reference also publishes the hash of this canonical request.
        let canonical = SignatureV4.canonicalRequest(method: "GET", url: url,
                                                     headers: [("Range", "bytes=0-9")] + headers.dropLast(),
                                                     payloadHash: emptyHash)
        XCTAssertEqual(sha256(canonical.text), "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972")
    }

    func testS3ReferenceListObjectsAndLifecycle() {
        func signature(_ url: String) -> String? {
            let headers = SignatureV4.headers(method: "GET", url: url, headers: [], key: exampleKey,
                                              region: "us-east-1", service: "s3", time: exampleTime,
                                              payloadHash: emptyHash)
            let authorization = value("authorization", in: headers)
            XCTAssertTrue(authorization?.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date,") == true)
            return authorization?.split(separator: "=").last.map(String.init)
        }
        XCTAssertEqual(signature("https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J"),
                       "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
        // A name without a value is signed as `lifecycle=`.
        XCTAssertEqual(signature("https://examplebucket.s3.amazonaws.com/?lifecycle"),
                       "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    func testUriEncodeKeepsOnlyTheUnreservedCharacters() {
        XCTAssertEqual(SignatureV4.uriEncode("c'd+e&f.txt", encodeSlash: true), "c%27d%2Be%26f.txt")
        XCTAssertEqual(SignatureV4.uriEncode("sp ace", encodeSlash: true), "sp%20ace")
        XCTAssertEqual(SignatureV4.uriEncode("ünï cödé", encodeSlash: true), "%C3%BCn%C3%AF%20c%C3%B6d%C3%A9")
        XCTAssertEqual(SignatureV4.uriEncode("AZaz09-_.~", encodeSlash: true), "AZaz09-_.~")
        XCTAssertEqual(SignatureV4.uriEncode("(x)=y;50%:@!$*,", encodeSlash: true),
                       "%28x%29%3Dy%3B50%25%3A%40%21%24%2A%2C")
        XCTAssertEqual(SignatureV4.uriEncode("data/a b", encodeSlash: true), "data%2Fa%20b")
        XCTAssertEqual(SignatureV4.uriEncode("data/a b", encodeSlash: false), "data/a%20b")
    }

    func testThePathIsEncodedOnceWhateverFormItCameIn() {
        // Raw, and as the identity writes it (encodeSegment leaves `'+&` raw): the same canonical path.
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/data/c'd+e&f.txt"), "/bkt/data/c%27d%2Be%26f.txt")
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/data/c%27d%2Be%26f.txt"), "/bkt/data/c%27d%2Be%26f.txt")
        // Decoded before it is encoded: never `%2520`; lowercase escapes come out uppercase.
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/a%20b/%c3%bcn.txt"), "/bkt/a%20b/%C3%BCn.txt")
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/50%25.txt"), "/bkt/50%25.txt")
        // A `+` in a path is a plus, and an escaped slash stays inside its segment.
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/a+b%2Fc"), "/bkt/a%2Bb%2Fc")
        XCTAssertEqual(SignatureV4.canonicalURI(path: "/bkt/dir/"), "/bkt/dir/")
        XCTAssertEqual(SignatureV4.canonicalURI(path: ""), "/")
    }

    func testTheQueryIsSortedAndEveryNameAndValueEncoded() {
        XCTAssertEqual(SignatureV4.canonicalQuery("prefix=data/&list-type=2&delimiter=/&encoding-type=url"),
                       "delimiter=%2F&encoding-type=url&list-type=2&prefix=data%2F")
        // A continuation token holds `+/=`: each is a literal character, written `%2B`, `%2F`, `%3D`, whether it
        // came raw or encoded already.
        let expected = "continuation-token=1%2Fab%2Bc%3D%3D&list-type=2"
        XCTAssertEqual(SignatureV4.canonicalQuery("list-type=2&continuation-token=1/ab+c=="), expected)
        XCTAssertEqual(SignatureV4.canonicalQuery("list-type=2&continuation-token=1%2Fab%2Bc%3D%3D"), expected)
        XCTAssertEqual(SignatureV4.canonicalQuery("prefix=sp ace/&max-keys=2"), "max-keys=2&prefix=sp%20ace%2F")
        XCTAssertEqual(SignatureV4.canonicalQuery("b=2&a=2&a=1&lifecycle"), "a=1&a=2&b=2&lifecycle=")
        XCTAssertEqual(SignatureV4.canonicalQuery(""), "")
    }

    func testASessionTokenIsSentAndSigned() {
        let key = ObjectStoreKey(accessKeyID: "AKID", secretAccessKey: "SECRETKEY",
                                 sessionToken: "FwoGZXIvYXdzE+token/==")
        // 2026-11-26T04:30:00Z. The identity's raw `'+&` are signed as the strict form.
        let headers = SignatureV4.headers(
            method: "GET", url: "https://s3.eu-west-1.amazonaws.com/bkt/data/c'd+e&f.txt",
            headers: [("Range", "bytes=0-1048575"), ("If-Match", "\"9b2cf535f27731c974343645a3985328\"")],
            key: key, region: "eu-west-1", service: "s3", time: 1_795_667_400)
        XCTAssertEqual(headers.map(\.name),
                       ["Host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "Authorization"])
        XCTAssertEqual(value("x-amz-security-token", in: headers), "FwoGZXIvYXdzE+token/==")
        XCTAssertEqual(value("x-amz-content-sha256", in: headers), "UNSIGNED-PAYLOAD")
        // Independent.
        XCTAssertEqual(value("authorization", in: headers),
                       "AWS4-HMAC-SHA256 Credential=AKID/20261126/eu-west-1/s3/aws4_request, "
                       + "SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
                       + "Signature=013845aa88089771ae6b008ae63139a47198820dd8202f28f9b35134d9044267")
    }

    func testAPortThatIsNotTheSchemesDefaultIsSignedWithTheHost() {
        let key = ObjectStoreKey(accessKeyID: "AKID", secretAccessKey: "SECRETKEY")
        let url = "http://127.0.0.1:9000/bkt?list-type=2&prefix=data%2F&delimiter=%2F&encoding-type=url"
            + "&continuation-token=1%2Fab%2Bc%3D"
        let headers = SignatureV4.headers(method: "GET", url: url, headers: [], key: key, region: "us-east-1",
                                          service: "s3", time: 1_795_667_400)
        XCTAssertEqual(value("host", in: headers), "127.0.0.1:9000")
        // Independent.
        XCTAssertEqual(value("authorization", in: headers),
                       "AWS4-HMAC-SHA256 Credential=AKID/20261126/us-east-1/s3/aws4_request, "
                       + "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                       + "Signature=fb8bd03fdaf155063d7ef2c97cb1ebbf37b3054263cbb59710140fe956c70230")
        // The default port is left out, as curl leaves it out of the Host it sends; userinfo never counts.
        func host(_ url: String) -> String? {
            value("host", in: SignatureV4.headers(method: "GET", url: url, headers: [], key: key, region: "r",
                                                 service: "s3", time: 0))
        }
        XCTAssertEqual(host("https://B.S3.example.com:443/k"), "b.s3.example.com")
        XCTAssertEqual(host("http://id:pw@store.example:80/k"), "store.example")
        XCTAssertEqual(host("https://store.example:9443/k#part"), "store.example:9443")
        XCTAssertEqual(host("http://[::1]:9000/bkt"), "[::1]:9000")
        XCTAssertEqual(host("http://[::1]/bkt"), "[::1]")
    }

    func testHeaderValuesAreTrimmedAndAGivenHostIsSignedInsteadOfTheURLs() {
        let key = ObjectStoreKey(accessKeyID: "AKID", secretAccessKey: "SECRETKEY")
        func sign(_ headers: [Header]) -> [Header] {
            SignatureV4.headers(method: "GET", url: "http://127.0.0.1:9000/bkt/k", headers: headers, key: key,
                                region: "us-east-1", service: "s3", time: 1_795_667_400)
        }
        let clean = sign([("range", "bytes=0-9")])
        XCTAssertEqual(value("authorization", in: sign([("Range", "  bytes=0-9\t ")])),
                       value("authorization", in: clean))
        XCTAssertNotEqual(value("authorization", in: sign([("Range", "bytes=0-8")])),
                          value("authorization", in: clean), "the range is signed")
        // A virtual-hosted request that names its Host: that Host is signed and no second one is added.
        let given = sign([("Host", "bkt.127.0.0.1:9000")])
        XCTAssertNil(value("host", in: given))
        XCTAssertNotEqual(value("authorization", in: given), value("authorization", in: sign([])))
    }

    func testTheDateOfALeapDayAndOfTheScope() {
        XCTAssertEqual(SignatureV4.amzDate(1_709_251_199), "20240229T235959Z")
        XCTAssertEqual(SignatureV4.amzDate(951_782_400), "20000229T000000Z")
        XCTAssertEqual(SignatureV4.amzDate(1_709_251_200), "20240301T000000Z")
        XCTAssertEqual(SignatureV4.amzDate(0), "19700101T000000Z")
        let headers = SignatureV4.headers(method: "GET", url: "https://h/", headers: [], key: exampleKey,
                                          region: "us-east-1", service: "s3", time: 1_709_251_199)
        XCTAssertTrue(value("authorization", in: headers)?.contains("/20240229/us-east-1/s3/aws4_request,") == true)
        // The HTTP date it shares its calendar with still reads the same.
        XCTAssertEqual(HTTPDate.format(1_709_251_199), "Thu, 29 Feb 2024 23:59:59 GMT")
    }

    func testAKeyNeverShowsItsSecretOrToken() {
        let key = ObjectStoreKey(accessKeyID: "AKIDVISIBLE", secretAccessKey: "SECRETVALUE", sessionToken: "TOKENVALUE")
        var dumped = ""
        dump(key, to: &dumped)
        for text in [String(describing: key), String(reflecting: key), "\(key)", dumped, "\([key])"] {
            XCTAssertTrue(text.contains("AKIDVISIBLE"), text)
            XCTAssertFalse(text.contains("SECRETVALUE"), text)
            XCTAssertFalse(text.contains("TOKENVALUE"), text)
        }
    }
}
