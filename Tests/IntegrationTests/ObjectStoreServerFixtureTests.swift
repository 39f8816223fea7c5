// The object-store fixtures checked on their own, with curl and the test signer only (no rangefs): that each
// server refuses what it should, serves what it should, and that its request log counts exactly what was sent.
// The object-store tests of rangefs rely on each of these facts.

import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

final class ObjectStoreServerFixtureTests: XCTestCase {
    private var scratch: TemporaryDirectory!
    private var motoServers: [MotoS3Server] = []
    private var rcloneServers: [RcloneS3Server] = []

    override func setUpWithError() throws {
        scratch = try TemporaryDirectory(prefix: "s3-fixture")
    }

    override func tearDown() {
        motoServers.forEach { $0.stop() }
        rcloneServers.forEach { $0.stop() }
        motoServers = []
        rcloneServers = []
        scratch = nil
        super.tearDown()
    }

    /// Skips loudly (the message starts "SKIPPING:") when `reason` is set.
    private func skip(_ reason: String?) throws {
        guard let reason else { return }
        print(String(repeating: "!", count: 72) + "\n" + reason + "\n" + String(repeating: "!", count: 72))
        throw XCTSkip(reason)
    }

    private func startMoto(checkSignatures: Bool = true, maxKeys: Int? = nil) throws -> MotoS3Server {
        try skip(ObjectStoreInstall.motoMissing)
        let server = try MotoS3Server(scratch: scratch.path, checkSignatures: checkSignatures, maxKeys: maxKeys)
        motoServers.append(server)
        return server
    }

    private func startRclone(folder: String, authKey: (accessKeyID: String, secretAccessKey: String)?) throws
        -> RcloneS3Server {
        try skip(ObjectStoreInstall.rcloneMissing)
        let server = try RcloneS3Server(scratch: scratch.path, folder: folder, authKey: authKey)
        rcloneServers.append(server)
        return server
    }

    /// moto with signature checking: unsigned and wrong-secret requests refused, signed ones served with S3's
    /// semantics (206 for a Range, 412 for a wrong If-Match), and the log counts each LIST, GET and HEAD; seeding
    /// itself is not counted.
    func testMotoRefusesUnsignedAndCountsWhatWasSent() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let first = Array("first object\n".utf8), spaced = Array("spaced, unicode\n".utf8)
        try moto.put(bucket: "bkt", objects: [("data/f1.txt", first), ("data/a b ünï.txt", spaced),
                                              ("data/sub/f2.txt", [1, 2, 3])])
        XCTAssertEqual(moto.requests(), [], "seeding sends no S3 request")

        let unsigned = try moto.client.send("GET", bucket: "bkt", key: "data/f1.txt", signed: false)
        XCTAssertEqual(unsigned.status, 403, "unsigned GET: \(unsigned.text)")
        let wrong = try S3TestClient(endpoint: moto.endpoint, folder: scratch.path + "/wrong",
                                     accessKeyID: moto.accessKeyID, secretAccessKey: "not-the-secret")
        let wrongAnswer = try wrong.send("GET", bucket: "bkt", key: "data/f1.txt")
        XCTAssertEqual(wrongAnswer.status, 403)
        XCTAssertTrue(wrongAnswer.text.contains("SignatureDoesNotMatch"), wrongAnswer.text)

        let whole = try moto.client.send("GET", bucket: "bkt", key: "data/f1.txt")
        XCTAssertEqual(whole.status, 200, whole.text)
        XCTAssertEqual(whole.body, first)
        let etag = try XCTUnwrap(whole.header("ETag"))
        let ranged = try moto.client.send("GET", bucket: "bkt", key: "data/a b ünï.txt",
                                          headers: ["Range": "bytes=0-5"])
        XCTAssertEqual(ranged.status, 206, ranged.text)
        XCTAssertEqual(ranged.body, Array(spaced[0...5]))
        let matching = try moto.client.send("GET", bucket: "bkt", key: "data/f1.txt",
                                            headers: ["Range": "bytes=0-4", "If-Match": etag])
        XCTAssertEqual(matching.status, 206)
        let stale = try moto.client.send("GET", bucket: "bkt", key: "data/f1.txt",
                                         headers: ["Range": "bytes=0-4", "If-Match": "\"0123456789abcdef\""])
        XCTAssertEqual(stale.status, 412, "moto honours If-Match: \(stale.text)")
        let listing = try moto.client.send("GET", bucket: "bkt",
                                           query: [("list-type", "2"), ("prefix", "data/"), ("delimiter", "/")])
        XCTAssertEqual(listing.status, 200, listing.text)
        XCTAssertTrue(listing.text.contains("<Key>data/f1.txt</Key>")
                      && listing.text.contains("<Key>data/a b ünï.txt</Key>")
                      && listing.text.contains("<Prefix>data/sub/</Prefix>"), listing.text)
        let head = try moto.client.send("HEAD", bucket: "bkt", key: "data/sub/f2.txt")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "3")

        let log = moto.requests()
        XCTAssertEqual(log.count(.refused), 2, "\(moto.requestLog())")
        XCTAssertEqual(log.count(.get, bucket: "bkt"), 4, "\(moto.requestLog())")
        XCTAssertEqual(log.count(.get, bucket: "bkt", keyPrefix: "data/a b ünï"), 1, "keys are logged decoded")
        XCTAssertEqual(log.count(.list, bucket: "bkt"), 1, "\(moto.requestLog())")
        XCTAssertEqual(log.count(.head, bucket: "bkt", keyPrefix: "data/sub/"), 1)
        XCTAssertEqual(log.count, 8, "\(moto.requestLog())")

        moto.clearRequestLog()
        XCTAssertEqual(moto.requests(), [])
        try moto.delete(bucket: "bkt", key: "data/f1.txt")
        XCTAssertEqual(try moto.client.send("GET", bucket: "bkt", key: "data/f1.txt").status, 404)
        XCTAssertEqual(moto.requestLog(), ["GET /bkt/data/f1.txt 404"])
        XCTAssertThrowsError(try moto.makePublic(bucket: "bkt"), "moto with checking on cannot serve anonymously")
    }

    /// 2,500 objects are seeded in one step and list as three ListObjectsV2 pages of 1,000, 1,000 and 500, each
    /// page counted once.
    func testMotoSeedsThousandsOfObjectsForPaging() throws {
        let moto = try startMoto()
        try moto.createBucket("many")
        let started = Date()
        let objects = (0..<2500).map { (key: String(format: "flat/f%05d.bin", $0), bytes: Array("\($0)".utf8)) }
        try moto.put(bucket: "many", objects: objects)
        print("seeded 2,500 objects in \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        var token: String?
        var pageSizes: [Int] = []
        repeat {
            var query = [("list-type", "2"), ("prefix", "flat/")]
            if let token { query.append(("continuation-token", token)) }
            let page = try moto.client.send("GET", bucket: "many", query: query)
            XCTAssertEqual(page.status, 200, page.text)
            pageSizes.append(page.text.components(separatedBy: "<Key>").count - 1)
            token = element("NextContinuationToken", in: page.text)
        } while token != nil && pageSizes.count < 5
        XCTAssertEqual(pageSizes, [1000, 1000, 500])
        XCTAssertEqual(moto.requests().count(.list, bucket: "many"), 3, "\(moto.requestLog())")
        let last = try moto.client.send("GET", bucket: "many", key: "flat/f02499.bin")
        XCTAssertEqual(last.text, "2499")
    }

    /// Without signature checking moto serves anyone; an object is still private (403) until `makePublic`. An empty
    /// object reads empty. A small `maxKeys` pages a few keys.
    func testMotoWithoutCheckingServesAPublicBucketAndSmallPages() throws {
        let moto = try startMoto(checkSignatures: false, maxKeys: 2)
        try moto.createBucket("pub")
        try moto.put(bucket: "pub", objects: [("k1", [1]), ("k2", [2]), ("k3", [3]), ("k4-empty", [])])
        XCTAssertEqual(try moto.client.send("GET", bucket: "pub", key: "k1", signed: false).status, 403)
        try moto.makePublic(bucket: "pub")
        let anonymous = try moto.client.send("GET", bucket: "pub", key: "k1", signed: false)
        XCTAssertEqual(anonymous.status, 200)
        XCTAssertEqual(anonymous.body, [1])
        let empty = try moto.client.send("GET", bucket: "pub", key: "k4-empty")
        XCTAssertEqual(empty.status, 200)
        XCTAssertEqual(empty.body, [], "an empty object reads empty")
        let page = try moto.client.send("GET", bucket: "pub", query: [("list-type", "2")], signed: false)
        XCTAssertEqual(element("MaxKeys", in: page.text), "2")
        XCTAssertEqual(element("IsTruncated", in: page.text), "true")
        XCTAssertEqual(moto.requests().count(.list), 1)
        XCTAssertEqual(moto.requests().count(.get), 2, "the 403 counts as refused: \(moto.requestLog())")
    }

    /// rclone with --auth-key: unsigned → 400, wrong secret → 403, signed requests for keys with spaces, UTF-8,
    /// `+`, `%`, `~()=&` served (rclone checks the strictly encoded path); the log counts them; the secret is in
    /// neither rclone's command line nor its log.
    func testRcloneWithKeyRefusesUnsignedAndCountsWhatWasSent() throws {
        let served = scratch.path + "/served"
        let keys = ["data/a b.txt", "data/ünï cödé.txt", "data/a+b.txt", "data/50%.txt", "data/tilde~(x)=y&z.txt"]
        try FileManager.default.createDirectory(atPath: served + "/bkt/data", withIntermediateDirectories: true)
        for key in keys { try Data(key.utf8).write(to: URL(fileURLWithPath: served + "/bkt/" + key)) }
        let secret = "rclone-fixture-secret-\(getpid())"
        let rclone = try startRclone(folder: served, authKey: ("RANGEFSFIXTURE", secret))

        let unsigned = try rclone.client.send("GET", bucket: "bkt", key: keys[0], signed: false)
        XCTAssertEqual(unsigned.status, 400, unsigned.text)
        XCTAssertTrue(unsigned.text.contains("UnsupportedAlgorithm"), unsigned.text)
        let wrong = try S3TestClient(endpoint: rclone.endpoint, folder: scratch.path + "/wrong",
                                     accessKeyID: "RANGEFSFIXTURE", secretAccessKey: "not-the-secret")
        XCTAssertEqual(try wrong.send("GET", bucket: "bkt", key: keys[0]).status, 403)
        for key in keys {
            let answer = try rclone.client.send("GET", bucket: "bkt", key: key)
            XCTAssertEqual(answer.status, 200, "\(key): \(answer.text)")
            XCTAssertEqual(answer.text, key)
        }
        let listing = try rclone.client.send("GET", bucket: "bkt", query: [("list-type", "2"), ("prefix", "data/")])
        XCTAssertEqual(listing.status, 200, listing.text)
        XCTAssertEqual(listing.text.components(separatedBy: "<Key>").count - 1, keys.count, listing.text)
        XCTAssertTrue(listing.text.contains("<Key>data/tilde~(x)=y&amp;z.txt</Key>"), listing.text)

        let log = rclone.requests()
        XCTAssertEqual(log.count(.refused), 2, "\(rclone.requestLog())")
        XCTAssertEqual(log.count(.get, bucket: "bkt"), keys.count, "\(rclone.requestLog())")
        XCTAssertEqual(log.count(.get, bucket: "bkt", keyPrefix: "data/ünï"), 1)
        XCTAssertEqual(log.count(.list, bucket: "bkt"), 1, "\(rclone.requestLog())")
        XCTAssertEqual(log.count, keys.count + 3)

        let commandLine = (try? String(contentsOfFile: "/proc/\(rclone.pid)/cmdline", encoding: .utf8)) ?? ""
        XCTAssertFalse(commandLine.isEmpty)
        XCTAssertFalse(commandLine.contains(secret), "the secret is not on rclone's command line")
        let logText = try String(contentsOfFile: rclone.serverFolder + "/rclone.log", encoding: .utf8)
        XCTAssertFalse(logText.contains(secret), "the secret is not in rclone's log")
    }

    /// rclone without a key serves anyone; a file added behind its back shows after `refresh()`.
    func testRcloneWithoutKeyServesAnonymously() throws {
        let served = scratch.path + "/served"
        try FileManager.default.createDirectory(atPath: served + "/open", withIntermediateDirectories: true)
        try Data("one".utf8).write(to: URL(fileURLWithPath: served + "/open/one.txt"))
        let rclone = try startRclone(folder: served, authKey: nil)
        let first = try rclone.client.send("GET", bucket: "open", query: [("list-type", "2")])
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertTrue(first.text.contains("<Key>one.txt</Key>"))
        try Data("two".utf8).write(to: URL(fileURLWithPath: served + "/open/two.txt"))
        try rclone.refresh()
        let second = try rclone.client.send("GET", bucket: "open", query: [("list-type", "2")])
        XCTAssertTrue(second.text.contains("<Key>two.txt</Key>"), second.text)
        let head = try rclone.client.send("HEAD", bucket: "open", key: "two.txt")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(rclone.requestLog().filter { $0.hasPrefix("LIST /open") }.count, 2, "\(rclone.requestLog())")
        XCTAssertEqual(rclone.requests().count(.head, bucket: "open", keyPrefix: "two.txt"), 1)
    }

    /// The text of the first `<name>` element in `xml`, or nil.
    private func element(_ name: String, in xml: String) -> String? {
        guard let start = xml.range(of: "<\(name)>"),
              let end = xml.range(of: "</\(name)>", range: start.upperBound..<xml.endIndex)
        else { return nil }
        return String(xml[start.upperBound..<end.lowerBound])
    }
}
