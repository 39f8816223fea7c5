@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSSystem
import RangeFSTestSupport
import Synchronization
import XCTest
@testable import RangeFSObjectStore

/// Issue 38: `s3://` and `gs://` sources become https identities whose origin is an object store; requests to it
/// are signed and carry If-Match; its directories are listed with ListObjectsV2, page after page.
final class ObjectStoreTests: XCTestCase {
    let key = ObjectStoreKey(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "SECRET/KEY+x", sessionToken: nil)

    func testSourcesBecomeHTTPSIdentitiesPathStyleForAnEndpointAndVirtualHostedOnAWS() throws {
        var defaults = ObjectStoreDefaults(endpoint: "http://127.0.0.1:9000/", region: "eu-west-1", key: key)
        let tree = try XCTUnwrap(ObjectStoreURL.identity(of: "s3://bkt/data/", defaults: defaults))
        XCTAssertEqual(tree.url, "http://127.0.0.1:9000/bkt/data/")
        XCTAssertEqual(tree.access, ObjectStoreAccess(region: "eu-west-1", pathStyle: true, key: key))
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://bkt", defaults: defaults)?.url, "http://127.0.0.1:9000/bkt/")
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://bkt/a b/é.bin", defaults: defaults)?.url,
                       "http://127.0.0.1:9000/bkt/a%20b/%C3%A9.bin", "key segments are percent-encoded")
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://bkt/a%20b", defaults: defaults)?.url,
                       "http://127.0.0.1:9000/bkt/a%2520b", "a key is taken as written, as the AWS tools take it")

        defaults.endpoint = nil
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://bkt/k.bin", defaults: defaults)?.url,
                       "https://bkt.s3.eu-west-1.amazonaws.com/k.bin")
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://my.bucket/k", defaults: defaults)?.url,
                       "https://s3.eu-west-1.amazonaws.com/my.bucket/k", "a dotted name cannot be a TLS host label")
        defaults.pathStyle = true
        XCTAssertEqual(ObjectStoreURL.identity(of: "s3://bkt/k.bin", defaults: defaults)?.url,
                       "https://s3.eu-west-1.amazonaws.com/bkt/k.bin")
        let google = try XCTUnwrap(ObjectStoreURL.identity(of: "gs://pub-data/x/", defaults: defaults))
        XCTAssertEqual(google.url, "https://storage.googleapis.com/pub-data/x/")
        XCTAssertEqual(google.access.region, "auto")
        XCTAssertNil(google.access.key, "the environment's AWS key never goes to Google")

        for bad in ["s3://", "s3://ab/k", "s3://user:secret@bkt/k", "s3://bk t/k", "http://bkt/k"] {
            XCTAssertNil(ObjectStoreURL.identity(of: bad, defaults: defaults), bad)
        }
    }

    func testADirectoryIsListedFromItsBucketWithItsPrefixInACanonicalQuery() throws {
        let path = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
        let listing = try XCTUnwrap(ObjectStoreURL.listing(of: "http://h:9000/bkt/a%20b/c/", access: path))
        XCTAssertEqual(listing.bucketURL, "http://h:9000/bkt")
        XCTAssertEqual(listing.prefix, "a b/c/")
        XCTAssertEqual(ObjectStoreURL.listing(of: "http://h:9000/bkt/", access: path)?.prefix, "")
        XCTAssertNil(ObjectStoreURL.listing(of: "http://h:9000/", access: path), "no bucket")
        let virtual = ObjectStoreAccess(region: "us-east-1", pathStyle: false, key: nil)
        XCTAssertEqual(ObjectStoreURL.listing(of: "https://bkt.s3.amazonaws.com/d/", access: virtual)?.bucketURL,
                       "https://bkt.s3.amazonaws.com/")
        XCTAssertEqual(ObjectStoreURL.listURL(bucketURL: "http://h:9000/bkt", prefix: "a b/c/", continuation: "1+/=x"),
                       "http://h:9000/bkt?continuation-token=1%2B%2F%3Dx&delimiter=%2F&encoding-type=url"
                       + "&list-type=2&prefix=a%20b%2Fc%2F")
    }

    /// An object store's origin gets If-Match and a signature on the wire; a web server's keeps If-Range; the
    /// identity the mount holds never carries the key.
    func testRequestsToAnObjectStoreAreSignedAndAskIfMatch() throws {
        let table = CredentialTable()
        table.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil,
                             key: ("AKIDEXAMPLE", "SECRET/KEY+x", "TOKEN=="), anonymous: false)
        let adopted = table.adopt("s3://bkt/data/f.bin")
        XCTAssertEqual(adopted.url, "http://127.0.0.1:9000/bkt/data/f.bin")
        XCTAssertTrue(adopted.changed)
        XCTAssertFalse(table.adopt("s3://bkt/data/g.bin").changed, "one record per origin")

        let wire = table.wire(for: adopted.url, range: 0..<100, validator: "\"abc\"", time: 1_764_115_200)
        XCTAssertEqual(wire.url, adopted.url)
        let names = wire.headers.map { $0.prefix { $0 != ":" }.lowercased() }
        XCTAssertEqual(names, ["if-match", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
                               "authorization"])
        XCTAssertTrue(wire.headers.contains("Host: 127.0.0.1:9000"), "the host is signed with its port")
        XCTAssertEqual(wire.headers.first, "If-Match: \"abc\"")
        XCTAssertTrue(wire.headers.contains("x-amz-date: 20251126T000000Z"), "\(wire.headers)")
        let authorization = try XCTUnwrap(wire.headers.last)
        XCTAssertTrue(authorization.hasPrefix("Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251126/us-east-1/s3/aws4_request"),
                      authorization)
        XCTAssertFalse(wire.headers.joined().contains("SECRET/KEY"), "the secret itself is never sent")
        XCTAssertEqual(table.wire(for: adopted.url, range: 0..<1, validator: "Wed, 21 Oct 2015 07:28:00 GMT",
                                  time: 0).headers.first, "If-Unmodified-Since: Wed, 21 Oct 2015 07:28:00 GMT")

        XCTAssertEqual(table.wire(for: "http://127.0.0.1:9000/bkt/it's+(1).bin", range: nil, validator: nil).url,
                       "http://127.0.0.1:9000/bkt/it%27s%2B%281%29.bin", "what is sent is what is signed")
        let presigned = table.wire(for: "http://127.0.0.1:9000/bkt/p.bin?X-Amz-Credential=A&X-Amz-Signature=S",
                                   range: 0..<1, validator: "\"e\"", time: 0)
        XCTAssertEqual(presigned.headers, ["If-Match: \"e\""], "a presigned URL is not signed twice")
        XCTAssertEqual(table.wire(for: "http://web/f", range: 0..<1, validator: "\"v\"").headers, ["If-Range: \"v\""])
        XCTAssertEqual(table.wire(for: "http://web/f", range: nil, validator: "\"v\"").headers, [])

        // Anonymous: no signature, If-Match still.
        let anonymous = CredentialTable()
        anonymous.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil, key: nil, anonymous: true)
        let url = anonymous.adopt("s3://pub/k").url
        XCTAssertEqual(anonymous.wire(for: url, range: 0..<1, validator: "\"e\"").headers, ["If-Match: \"e\""])
    }

    /// The key lives in the origin's record (saved in the 0600 credentials.json); a key given at a later mount
    /// replaces it there; the identity, which catalog.json and the cache hold, has no trace of it.
    func testAKeyGivenLaterReplacesTheKeptOneAndNoIdentityHoldsIt() throws {
        let table = CredentialTable()
        table.setObjectStore(endpoint: "http://h:9000", region: "r1", pathStyle: nil, key: ("OLD", "old-secret", nil),
                             anonymous: false)
        let url = table.adopt("s3://bkt/k").url
        XCTAssertFalse(url.contains("old-secret") || url.contains("OLD"))
        let saved = table.snapshot
        XCTAssertEqual(saved["http://h:9000"]?.objectStore?.key?.accessKeyID, "OLD")

        let remount = CredentialTable(saved)
        remount.setObjectStore(endpoint: "http://h:9000", region: nil, pathStyle: nil, key: nil, anonymous: false)
        XCTAssertEqual(remount.objectStore(for: url)?.key?.accessKeyID, "OLD", "no key given: the kept one stays")
        remount.setObjectStore(endpoint: nil, region: nil, pathStyle: nil, key: ("AWS", "aws-secret", "TOKEN"),
                               anonymous: false)
        XCTAssertEqual(remount.objectStore(for: url)?.key?.accessKeyID, "OLD",
                       "a key for AWS never goes to the origin of another store kept from an earlier mount")
        remount.setObjectStore(endpoint: "http://h:9000", region: nil, pathStyle: nil, key: ("NEW", "new-secret", nil),
                               anonymous: false)
        XCTAssertEqual(remount.objectStore(for: url)?.key?.accessKeyID, "NEW")
        remount.setObjectStore(endpoint: "http://h:9000", region: nil, pathStyle: nil, key: nil, anonymous: true)
        XCTAssertNil(remount.objectStore(for: url)?.key, "--s3-no-sign drops the kept key")
        remount.setObjectStore(endpoint: nil, region: nil, pathStyle: nil, key: nil, anonymous: false)
        XCTAssertEqual(remount.identity(of: "s3://bkt/k"), "https://bkt.s3.us-east-1.amazonaws.com/k",
                       "the defaults changed: a new endpoint is a new identity")
    }

    /// Pages are followed by their continuation tokens and handed on as one JSON listing, folders first, with
    /// sizes, dates and quoted ETags; DirectoryListing reads it like a web server's.
    func testPagesAreFollowedAndReadAsOneListing() throws {
        let origin = MemoryOrigin()
        let bucketURL = "http://h:9000/bkt"
        let page1 = #"""
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>d%2F</Prefix>
        <KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><Delimiter>%2F</Delimiter><IsTruncated>true</IsTruncated>
        <EncodingType>url</EncodingType><NextContinuationToken>tok+1/=</NextContinuationToken>
        <Contents><Key>d%2F</Key><Size>0</Size><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag></Contents>
        <Contents><Key>d%2Fa%20b.bin</Key><LastModified>2026-11-26T04:08:04.710Z</LastModified>
        <ETag>&quot;0123&quot;</ETag><Size>22</Size></Contents></ListBucketResult>
        """#
        let page2 = #"""
        <ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>
        <Contents><Key>d%2Fsub</Key><Size>3</Size><ETag>beef</ETag><LastModified>2026-11-26T04:08:05Z</LastModified></Contents>
        <CommonPrefixes><Prefix>d%2Fsub%2F</Prefix></CommonPrefixes></ListBucketResult>
        """#
        origin.serve(ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: "d/", continuation: nil), bytes: Array(page1.utf8))
        origin.serve(ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: "d/", continuation: "tok+1/="),
                     bytes: Array(page2.utf8))
        let access = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
        let body = try fetch(origin, "http://h:9000/bkt/d/", access: access).get()
        XCTAssertEqual(origin.requests.count, 2, "one request per page")
        let listing = DirectoryListing.parse(body, base: "http://h:9000/bkt/d/")
        XCTAssertEqual(listing.entries.map(\.name), ["sub", "a b.bin"], "folders first")
        XCTAssertEqual(listing.entries.map(\.isDirectory), [true, false], "a key that is also a prefix: the folder")
        XCTAssertEqual(listing.entries.map(\.url), ["http://h:9000/bkt/d/sub/", "http://h:9000/bkt/d/a%20b.bin"])
        XCTAssertEqual(listing.entries[1].size, 22)
        XCTAssertEqual(listing.entries[1].etag, "\"0123\"")
        XCTAssertEqual(listing.entries[1].modificationTime, RFC3339.parse("2026-11-26T04:08:04Z"))
        XCTAssertEqual(listing.skipped.map(\.link), ["sub"], "the object named like the folder is named in the log")
    }

    /// Keys sort by bytes, so a file `d/data` and others (`d/data-1.csv`) may fill a page before the prefix
    /// `d/data/` comes on the next: the folder still wins its name. A page that says more follow without a token
    /// fails the listing rather than cut it short.
    func testAFolderOnALaterPageWinsItsNameAndATruncatedPageNeedsAToken() throws {
        let origin = MemoryOrigin()
        let bucketURL = "http://h:9000/bkt"
        let page1 = #"""
            <ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
            <Contents><Key>d/data</Key><Size>1</Size></Contents><Contents><Key>d/data-1.csv</Key><Size>2</Size></Contents>
            <Contents><Key>d/\#u{301}x</Key><Size>3</Size></Contents></ListBucketResult>
            """#
        let page2 = "<ListBucketResult><IsTruncated>false</IsTruncated><CommonPrefixes><Prefix>d/data/</Prefix>"
            + "</CommonPrefixes></ListBucketResult>"
        origin.serve(ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: "d/", continuation: nil), bytes: Array(page1.utf8))
        origin.serve(ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: "d/", continuation: "t2"), bytes: Array(page2.utf8))
        let access = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
        let listing = DirectoryListing.parse(try fetch(origin, "http://h:9000/bkt/d/", access: access).get(),
                                             base: "http://h:9000/bkt/d/")
        XCTAssertEqual(listing.entries.map(\.name), ["data", "data-1.csv", "\u{301}x"])
        XCTAssertEqual(listing.entries.map(\.isDirectory), [true, false, false])

        let cut = MemoryOrigin()
        cut.serve(ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: "d/", continuation: nil),
                  bytes: Array("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>".utf8))
        guard case .failure(.badListing(let why)) = fetch(cut, "http://h:9000/bkt/d/", access: access) else {
            return XCTFail("a truncated page without a token must fail the listing")
        }
        XCTAssertTrue(why.contains("no continuation token"), why)
    }

    /// A store's refusal comes back in its own words, naming the bucket and the fix.
    func testARefusedListingSaysTheStoresCodeAndTheFix() throws {
        let refusing = RefusingStore(status: 403, body: #"""
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match
            </Message><RequestId>1</RequestId></Error>
            """#)
        let access = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
        let result = fetch(refusing, "http://h:9000/bkt/d/", access: access)
        XCTAssertEqual(result.failure, .objectStore(status: 403, code: "SignatureDoesNotMatch", bucket: "bkt"))
        let message = try XCTUnwrap(result.failure?.userMessage)
        XCTAssertTrue(message.contains("SignatureDoesNotMatch") && message.contains("AWS_SECRET_ACCESS_KEY"), message)
        XCTAssertEqual(fetch(RefusingStore(status: 503, body: "busy"), "http://h:9000/bkt/", access: access).failure,
                       .httpStatus(503), "a body that is no S3 error: the status")
    }

    /// gs:// is signed with Google's own key (`--gs-profile`) and no other: the AWS key signs s3:// on its
    /// endpoint and never goes to Google's origin, and Google's key never goes to the S3 endpoint.
    func testGSIsSignedWithGooglesKeyOnlyAndS3WithItsOwn() throws {
        let table = CredentialTable()
        table.setObjectStore(endpoint: "http://127.0.0.1:9000", region: nil, pathStyle: nil,
                             key: ("AWSKEY", "aws-secret", nil), googleKey: ("GOOGKEY", "goog-secret", nil),
                             anonymous: false)
        let google = table.adopt("gs://pub-data/a/b.bin").url
        XCTAssertEqual(google, "https://storage.googleapis.com/pub-data/a/b.bin")
        let signed = table.wire(for: google, range: 0..<10, validator: nil).headers
        let authorization = try XCTUnwrap(signed.first { $0.hasPrefix("Authorization: ") })
        XCTAssertTrue(authorization.contains("Credential=GOOGKEY/") && authorization.contains("/auto/s3/aws4_request"),
                      authorization)
        XCTAssertTrue(signed.contains("Host: storage.googleapis.com"), "\(signed)")
        let s3 = table.adopt("s3://bkt/k.bin").url
        let s3Authorization = table.wire(for: s3, range: 0..<10, validator: nil).headers.first { $0.hasPrefix("Authorization: ") }
        XCTAssertTrue(s3Authorization?.contains("Credential=AWSKEY/") == true, s3Authorization ?? "unsigned")

        let anonymous = CredentialTable()
        anonymous.setObjectStore(endpoint: nil, region: nil, pathStyle: nil, key: ("AWSKEY", "aws-secret", nil),
                                 anonymous: false)
        let unsigned = anonymous.adopt("gs://pub-data/a/b.bin").url
        XCTAssertFalse(anonymous.wire(for: unsigned, range: 0..<10, validator: nil).headers
            .contains { $0.hasPrefix("Authorization") }, "without --gs-profile gs:// goes unsigned")
    }

    func testSlowDownIsTriedAgainAndAccessDeniedIsNot() {
        XCTAssertTrue(FetchError.objectStore(status: 503, code: "SlowDown", bucket: "b").isTransient)
        XCTAssertFalse(FetchError.objectStore(status: 403, code: "AccessDenied", bucket: "b").isTransient)
    }

    /// A page refused with a failure that may pass (`SlowDown`, an expired session key) is asked again, and the
    /// listing goes on; a refusal that will not pass is not asked again.
    func testAPageRefusedForAWhileIsAskedAgain() throws {
        let access = ObjectStoreAccess(region: "us-east-1", pathStyle: true, key: nil)
        let page = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>d/a.bin</Key><Size>1</Size>"
            + "</Contents></ListBucketResult>"
        for code in ["SlowDown", "ExpiredToken"] {
            let store = RefusingStore(status: code == "SlowDown" ? 503 : 400,
                                      body: "<Error><Code>\(code)</Code></Error>", times: 2, then: page)
            let listing = DirectoryListing.parse(try fetch(store, "http://h:9000/bkt/d/", access: access).get(),
                                                 base: "http://h:9000/bkt/d/")
            XCTAssertEqual(listing.entries.map(\.name), ["a.bin"], code)
            XCTAssertEqual(store.requests.withLock { $0 }, 3, "\(code): refused twice, then listed")
        }
        let denied = RefusingStore(status: 403, body: "<Error><Code>AccessDenied</Code></Error>", times: 1, then: page)
        XCTAssertEqual(fetch(denied, "http://h:9000/bkt/d/", access: access).failure?.isTransient, false)
        XCTAssertEqual(denied.requests.withLock { $0 }, 1)
    }

    private func fetch(_ fetcher: any RangeFetching, _ url: String,
                       access: ObjectStoreAccess) -> Result<[UInt8], FetchError> {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<[UInt8], FetchError>?>(nil)
        fetcher.fetchObjectListing(url, access: access, limit: 1 << 20, timeout: 600) { answer in
            result.withLock { $0 = answer }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 600), .success)
        return result.withLock { $0 } ?? .failure(.cancelled)
    }
}

/// A store that answers its first `times` requests with one status and body, and the others with 200 and `then`.
private final class RefusingStore: RangeFetching, @unchecked Sendable {
    let status: Int
    let body: String
    let times: Int
    let then: String
    let requests = Mutex(0)

    init(status: Int, body: String, times: Int = .max, then: String = "") {
        self.status = status
        self.body = body
        self.times = times
        self.then = then
    }

    func start(_ request: RangeRequest, sink: any RangeResponseSink) {
        let refused = requests.withLock { count in
            count += 1
            return count <= times
        }
        let (status, body) = refused ? (status, body) : (200, then)
        DispatchQueue.global().async {
            _ = sink.receive(head: ResponseHead(status: status, headers: ["content-length": "\(body.utf8.count)"]))
            _ = Array(body.utf8).withUnsafeBytes { sink.receive(body: $0) }
            sink.complete(error: nil)
        }
    }

    func pauseBackground(_ paused: Bool) {}

    func wake() {}

    func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        completion(.failure(.httpStatus(status)))
    }
}

private extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
