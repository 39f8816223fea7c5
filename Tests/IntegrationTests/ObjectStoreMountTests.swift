// Issue 38: buckets mounted as trees, against real S3 servers on 127.0.0.1 (moto with signature checking on;
// rclone serve s3 with --auth-key). Requests are counted from the servers' own logs (ObjectStoreServers.swift).

import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

final class ObjectStoreMountTests: MountTestCase {
    private var servers: [() -> Void] = []

    override func tearDown() {
        driver?.unmountAll()
        servers.forEach { $0() }
        servers = []
        super.tearDown()
    }

    private func skip(_ reason: String?) throws {
        guard let reason else { return }
        print(String(repeating: "!", count: 72) + "\n" + reason + "\n" + String(repeating: "!", count: 72))
        throw XCTSkip(reason)
    }

    private func startMoto(checkSignatures: Bool = true, maxKeys: Int? = nil) throws -> MotoS3Server {
        try skip(ObjectStoreInstall.motoMissing)
        let server = try MotoS3Server(scratch: scratch.path, checkSignatures: checkSignatures, maxKeys: maxKeys)
        servers.append { server.stop() }
        if checkSignatures {
            // moto answers an unsigned request for an object it lacks with 500, not a refusal: asked of one it has
            // (made in its process, as seeding is: no request).
            try server.createBucket("unsigned-probe")
            try server.put(bucket: "unsigned-probe", key: "k", bytes: [1])
            checkRefusesUnsignedAndCounts(server.client, requests: server.requests, clear: server.clearRequestLog)
        }
        return server
    }

    /// What these tests count on from a server that checks signatures, checked on each one they start: an
    /// unsigned request is refused (so a file read shows that rangefs signed), and the server's log holds exactly
    /// what was sent, that one refusal (so a count from it is rangefs's traffic, no more, no less); the log is then
    /// started afresh for the test's own counts.
    private func checkRefusesUnsignedAndCounts(_ client: S3TestClient, requests: () -> [S3LoggedRequest],
                                               clear: () -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(requests(), [], "the server logged requests before any was sent", file: file, line: line)
        do {
            let unsigned = try client.send("GET", bucket: "unsigned-probe", key: "k", signed: false)
            XCTAssertTrue([400, 403].contains(unsigned.status), "an unsigned GET got \(unsigned.status): \(unsigned.text)",
                          file: file, line: line)
        } catch {
            XCTFail("an unsigned GET could not be sent: \(error)", file: file, line: line)
        }
        // A server may write its log line after its answer: until the line is there (an event; the minute only
        // bounds a server that never logs).
        let logged = Date().addingTimeInterval(60)
        while requests().isEmpty && Date() < logged { usleep(10_000) }
        XCTAssertEqual(requests().count, 1, "the log counts what was sent", file: file, line: line)
        XCTAssertEqual(requests().count(.refused), 1, "and calls it refused", file: file, line: line)
        clear()
        XCTAssertEqual(requests(), [], file: file, line: line)
    }

    /// `rangefs mount` with `environment` set (as a user's shell would; never on rangefs's own command line).
    @discardableResult
    private func mountS3(_ sources: [String], environment: [String: String], extra: [String] = [],
                         at point: String? = nil, cache folder: String? = nil) throws -> ProcessResult {
        let point = point ?? mountpoint
        if mkdir(point, 0o755) != 0 && errno != EEXIST { throw TestSupportError("mkdir \(point)") }
        let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let result = try Shell.run("/usr/bin/env", variables + [driver.binary, "mount", point] + sources
                                   + ["--cache", folder ?? cache] + extra, timeout: 300)
        if driver.isMounted(point) { driver.record(point) }
        return result
    }

    private func keys(_ moto: MotoS3Server) -> [String: String] {
        ["AWS_ACCESS_KEY_ID": moto.accessKeyID, "AWS_SECRET_ACCESS_KEY": moto.secretAccessKey]
    }

    private func randomBytes(_ count: Int) -> [UInt8] {
        let handle = FileHandle(forReadingAtPath: "/dev/urandom")
        defer { try? handle?.close() }
        return Array(handle?.readData(ofLength: count) ?? Data())
    }

    /// The store's LastModified of `key`, as seconds since 1970, from a signed listing of its folder.
    private func lastModified(_ moto: MotoS3Server, key: String) throws -> Int64 {
        let folder = key.split(separator: "/").dropLast().joined(separator: "/") + "/"
        let page = try moto.client.send("GET", bucket: "bkt", query: [("list-type", "2"), ("prefix", folder),
                                                                      ("delimiter", "/")])
        let text = page.text
        guard let keyRange = text.range(of: "<Key>\(key)</Key>"),
              let open = text.range(of: "<LastModified>", range: keyRange.upperBound..<text.endIndex),
              let close = text.range(of: "</LastModified>", range: open.upperBound..<text.endIndex) else {
            throw TestSupportError("no LastModified for \(key) in \(text.prefix(400))")
        }
        let stamp = String(text[open.upperBound..<close.lowerBound]).prefix(19) + "Z"
        let formatter = ISO8601DateFormatter()
        return Int64(try XCTUnwrap(formatter.date(from: String(stamp))).timeIntervalSince1970)
    }

    /// Acceptance 1 and 5 (moto, signatures checked): the tree's names, sizes and dates are the store's, every
    /// object's bytes are right, a listing is one LIST per folder and no HEAD; the key is in no argv, status,
    /// xattr, log or world-readable file.
    func testABucketPrefixMountsWithTheStoresNamesSizesDatesAndBytes() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let objects: [(String, [UInt8])] = [("data/a.bin", randomBytes(300_000)), ("data/b b.txt", Array("bee\n".utf8)),
                                            ("data/sub/c.bin", randomBytes(70_000)), ("other/x.bin", [1, 2, 3])]
        try moto.put(bucket: "bkt", objects: objects)
        moto.clearRequestLog()

        let mounted = try mountS3(["s3://bkt/data/"], environment: keys(moto),
                                  extra: ["--s3-endpoint", moto.endpoint, "--log-file", scratch.path + "/rangefs.log"])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["a.bin", "b b.txt", "sub"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/sub"), ["c.bin"])
        var dates: [String: Int64] = [:]
        for (key, bytes) in objects where key.hasPrefix("data/") {
            let info = try statFile(mountpoint + "/" + key.dropFirst("data/".count))
            XCTAssertEqual(Int(info.st_size), bytes.count, key)
            dates[key] = Int64(info.st_mtim.tv_sec)
        }
        let listsBeforeReading = moto.requests()
        XCTAssertEqual(listsBeforeReading.count(.list, bucket: "bkt"), 2, "one LIST per folder: \(listsBeforeReading)")
        XCTAssertEqual(listsBeforeReading.count(.head), 0)
        XCTAssertEqual(listsBeforeReading.count(.get, bucket: "bkt", keyPrefix: "data/"), 0, "ls -l and stat fetch nothing")
        for (key, date) in dates { XCTAssertEqual(date, try lastModified(moto, key: key), "\(key): the store's date") }
        for (key, bytes) in objects where key.hasPrefix("data/") {
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + key.dropFirst("data/".count)),
                           Shell.sha256(of: Data(bytes)), key)
        }
        XCTAssertEqual(moto.requests().count(.refused), 0, "every request was signed right")

        // The secret is nowhere a user or another user could read it.
        let secret = moto.secretAccessKey
        let status = try driver.run(["status", "--mount", mountpoint, "--all", "--json"])
        XCTAssertFalse(status.stdout.contains(secret))
        let attributes = try Shell.run("/usr/bin/getfattr", ["-d", "-R", mountpoint])
        XCTAssertFalse(attributes.stdout.contains(secret))
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        let commandLine = try String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .isoLatin1)
        XCTAssertFalse(commandLine.contains(secret), commandLine)
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertFalse(try String(contentsOfFile: scratch.path + "/rangefs.log", encoding: .utf8).contains(secret))
        let holders = try Shell.run("/bin/grep", ["-rlF", secret, cache]).stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(holders, [], "no file of the cache keeps the key (issue 45)")
        var info = stat()
        XCTAssertEqual(stat(cache + "/credentials.json", &info), 0)
        XCTAssertEqual(info.st_mode & 0o077, 0, "credentials.json is the owner's only")
    }

    /// Issue 45, case 9: a key from the environment is written to no file of the cache; a remount with it set
    /// again reads what is not cached, signed right; one without them says in one line that
    /// the key is missing and where to give it, and still serves what is cached.
    func testAKeyFromTheEnvironmentIsWrittenNowhereAndARemountTakesItFromThereAgain() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let a = randomBytes(100_000), b = randomBytes(80_000)
        try moto.put(bucket: "bkt", objects: [("data/a.bin", a), ("data/b.bin", b)])
        // moto refuses a session token it did not issue: the token is left to ObjectStoreKeyRenewalUnitTests.
        let environment = keys(moto)
        let first = try mountS3(["s3://bkt/data/"], environment: environment, extra: ["--s3-endpoint", moto.endpoint])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), Shell.sha256(of: Data(a)))
        try driver.unmount(mountpoint, cache: cache)
        let holders = try Shell.run("/bin/grep", ["-rlF", moto.secretAccessKey, cache]).stdout
        XCTAssertEqual(holders, "", "no file under the cache holds the secret")

        moto.clearRequestLog()
        let again = try mountS3([], environment: environment)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertFalse(again.stderr.contains("has no key"), again.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/b.bin"), Shell.sha256(of: Data(b)), "signed with the key again")
        XCTAssertEqual(moto.requests().count(.refused), 0, "\(moto.requests())")
        try driver.unmount(mountpoint, cache: cache)

        let bare = try mountS3([], environment: [:])
        XCTAssertEqual(bare.status, 0, bare.stderr)
        let said = bare.stderr.split(separator: "\n").filter { $0.contains("has no key") }
        XCTAssertEqual(said.count, 1, bare.stderr)
        XCTAssertTrue(said.first?.contains("AWS_ACCESS_KEY_ID") == true && said.first?.contains(moto.accessKeyID) == true,
                      bare.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), Shell.sha256(of: Data(a)), "the cached object")
    }

    /// Acceptance 1: a wrong secret fails the mount (exit 1) with one line naming SignatureDoesNotMatch.
    func testAWrongSecretFailsTheMountWithOneLineNamingTheStoresCode() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        try moto.put(bucket: "bkt", key: "data/a.bin", bytes: [1, 2, 3])
        var environment = keys(moto)
        environment["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        let result = try mountS3(["s3://bkt/data/"], environment: environment, extra: ["--s3-endpoint", moto.endpoint])
        XCTAssertEqual(result.status, 1, result.stderr)
        let lines = problemLines(result.stderr)
        XCTAssertEqual(lines.count, 1, result.stderr)
        XCTAssertTrue(lines.first?.contains("SignatureDoesNotMatch") == true, result.stderr)
        XCTAssertTrue(lines.first?.contains("AWS_SECRET_ACCESS_KEY") == true, result.stderr)
        XCTAssertFalse(result.stderr.contains("not-the-secret"))
    }

    /// Acceptance 4: an object replaced during a read gives the open handle an error, never the new object's
    /// bytes among the old; the next open reads the new object whole.
    func testAnObjectReplacedDuringAReadIsNeverMixedAndTheNextOpenReadsTheNewOne() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let size = 32 << 20
        let old = randomBytes(size), new = randomBytes(size)
        try moto.put(bucket: "bkt", key: "data/big.bin", bytes: old)
        XCTAssertEqual(try mountS3(["s3://bkt/data/"], environment: keys(moto),
                                   extra: ["--s3-endpoint", moto.endpoint]).status, 0)
        let path = mountpoint + "/big.bin"
        let descriptor = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        var head = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(Glibc.pread(descriptor, &head, head.count, 0), head.count)
        XCTAssertEqual(head, Array(old[0..<4096]))

        try moto.put(bucket: "bkt", key: "data/big.bin", bytes: new)
        moto.clearRequestLog()
        let tailOffset = size - (1 << 20)
        var tail = [UInt8](repeating: 0, count: 1 << 20)
        let got = Glibc.pread(descriptor, &tail, tail.count, off_t(tailOffset))
        if got > 0 {
            XCTAssertEqual(Array(tail[0..<got]), Array(old[tailOffset..<(tailOffset + got)]),
                           "bytes the old handle reads are the old object's, or none")
        } else {
            XCTAssertTrue(errno == ESTALE || errno == EIO, "the old handle fails: \(String(cString: strerror(errno)))")
        }
        let refusedStale = moto.requests().filter { $0.kind == .get && $0.detail.contains("412") }
        XCTAssertFalse(got <= 0 && refusedStale.isEmpty, "the store refused the stale If-Match: \(moto.requestLog())")

        // A new open after the change: the new object, whole.
        var sawNew = false
        for _ in 0..<20 where !sawNew {
            if let digest = try? Shell.sha256(of: path), digest == Shell.sha256(of: Data(new)) { sawNew = true }
        }
        XCTAssertTrue(sawNew, "the next open reads the new object")
    }

    /// Issue 45, case 7: a 0-byte object (`_SUCCESS` and other markers) is an empty file, in a listed prefix and
    /// named on its own, online and offline: a Range request for it gets 416 InvalidRange from S3 servers, which
    /// is no error for a file with no bytes. `cp -r` of the prefix copies it.
    func testEmptyObjectsReadAsEmptyFilesOnlineAndOffline() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let a = randomBytes(5_000)
        try moto.put(bucket: "bkt", objects: [("data/_SUCCESS", []), ("data/a.bin", a), ("data/sub/.keep", []),
                                              ("marker", [])])
        let mounted = try mountS3(["s3://bkt/data/", "s3://bkt/marker"], environment: keys(moto),
                                  extra: ["--s3-endpoint", moto.endpoint])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        for name in ["data/_SUCCESS", "data/sub/.keep", "marker"] {
            let path = mountpoint + "/" + name
            XCTAssertEqual(Int(try statFile(path).st_size), 0, name)
            let cat = try Shell.run("/bin/cat", [path])
            XCTAssertEqual(cat.status, 0, "\(name): \(cat.stderr)")
            XCTAssertEqual(cat.stdout, "", name)
        }
        let copy = scratch.path + "/copy"
        let copied = try Shell.run("/bin/cp", ["-r", mountpoint + "/data", copy])
        XCTAssertEqual(copied.status, 0, "cp -r of a prefix with empty objects: \(copied.stderr)")
        XCTAssertEqual(try Shell.sha256(of: copy + "/a.bin"), Shell.sha256(of: Data(a)))
        XCTAssertEqual(Int(try statFile(copy + "/_SUCCESS").st_size), 0)
        try driver.unmount(mountpoint, cache: cache)
        moto.stop()

        // Offline: the kept listing and the saved set still show them, and they still read as empty.
        let remounted = try mountS3([], environment: [:])
        XCTAssertEqual(remounted.status, 0, remounted.stderr)
        for name in ["data/_SUCCESS", "marker"] {
            let cat = try Shell.run("/bin/cat", [mountpoint + "/" + name])
            XCTAssertEqual(cat.status, 0, "\(name) offline: \(cat.stderr)")
            XCTAssertEqual(cat.stdout, "", name)
        }
    }

    /// Issue 45: the first GET of a listed object carries its listed ETag (`If-Match`): an object replaced since
    /// the listing (by one of the same size) answers 412, is probed again as it is now, and reads whole as the new
    /// version; nothing of it is taken for the listed one.
    func testTheFirstReadOfAListedObjectAsksForTheListedVersion() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let old = randomBytes(100_000), new = randomBytes(100_000)
        try moto.put(bucket: "bkt", key: "data/a.bin", bytes: old)
        XCTAssertEqual(try mountS3(["s3://bkt/data/"], environment: keys(moto),
                                   extra: ["--s3-endpoint", moto.endpoint]).status, 0)
        XCTAssertEqual(Int(try statFile(mountpoint + "/a.bin").st_size), old.count, "listed")
        try moto.put(bucket: "bkt", key: "data/a.bin", bytes: new)
        moto.clearRequestLog()
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), Shell.sha256(of: Data(new)), "the object as it is now")
        let gets = moto.requests().filter { $0.kind == .get && $0.key == "data/a.bin" }
        XCTAssertTrue(gets.first?.detail.contains("412") ?? false,
                      "the first GET asked for the listed version and was refused: \(moto.requestLog())")
    }

    /// Acceptance 2 (remount): with the store stopped, a remount of the same cache shows the same tree (from the
    /// saved listings) and serves every object read before.
    func testARemountWithTheStoreStoppedShowsTheTreeAndServesWhatIsCached() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let a = randomBytes(200_000), c = randomBytes(50_000)
        try moto.put(bucket: "bkt", objects: [("data/a.bin", a), ("data/sub/c.bin", c), ("data/d.bin", [9])])
        XCTAssertEqual(try mountS3(["s3://bkt/data/"], environment: keys(moto),
                                   extra: ["--s3-endpoint", moto.endpoint]).status, 0)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), Shell.sha256(of: Data(a)))
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/sub/c.bin"), Shell.sha256(of: Data(c)))
        moto.clearRequestLog()
        _ = try FileManager.default.contentsOfDirectory(atPath: mountpoint)
        _ = try statFile(mountpoint + "/a.bin")
        XCTAssertEqual(moto.requests().count(.list), 0, "a second ls within --dir-cache-time asks nothing")
        try driver.unmount(mountpoint, cache: cache)

        // Remounted with the store up: the kept listings show the tree, and the objects read before, whose ETags
        // are still the listed ones, are read with no request at all.
        moto.clearRequestLog()
        XCTAssertEqual(try mountS3([], environment: keys(moto)).status, 0)
        XCTAssertEqual(try Shell.run("/usr/bin/find", [mountpoint]).stdout.split(separator: "\n").count, 5)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/sub/c.bin"), Shell.sha256(of: Data(c)))
        // Counted after the unmount: the open's background check, had it been due, went out at the open.
        try driver.unmount(mountpoint, cache: cache)
        XCTAssertEqual(moto.requests(), [], "a remount shows the tree and reads what is cached with no request")

        // A kept listing older than --dir-cache-time still shows at once, and a visit lists it again behind.
        try moto.put(bucket: "bkt", key: "data/new.bin", bytes: [7])
        XCTAssertEqual(try mountS3([], environment: keys(moto), extra: ["--dir-cache-time", "0"]).status, 0)
        var names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted()
        XCTAssertEqual(names, ["a.bin", "d.bin", "sub"], "the kept listing first")
        let deadline = Date().addingTimeInterval(60)
        while !names.contains("new.bin") && Date() < deadline {
            usleep(100_000)
            names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted()
        }
        XCTAssertEqual(names, ["a.bin", "d.bin", "new.bin", "sub"], "then the store's")
        try driver.unmount(mountpoint, cache: cache)
        moto.stop()

        let remounted = try mountS3([], environment: [:])
        XCTAssertEqual(remounted.status, 0, remounted.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(),
                       ["a.bin", "d.bin", "new.bin", "sub"])
        XCTAssertEqual(Int(try statFile(mountpoint + "/a.bin").st_size), a.count)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), Shell.sha256(of: Data(a)))
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/sub/c.bin"), Shell.sha256(of: Data(c)))
    }

    /// Acceptance 5: a key from a profile file (named with --s3-profile), and a public bucket read unsigned.
    func testAProfilesKeyAndAnonymousAccessToAPublicBucketWork() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let bytes = randomBytes(100_000)
        try moto.put(bucket: "bkt", key: "data/p.bin", bytes: bytes)
        let credentials = scratch.path + "/aws-credentials"
        try "[work]\naws_access_key_id = \(moto.accessKeyID)\naws_secret_access_key = \(moto.secretAccessKey)\n"
            .write(toFile: credentials, atomically: true, encoding: .utf8)
        let fromProfile = try mountS3(["s3://bkt/data/"], environment: ["AWS_SHARED_CREDENTIALS_FILE": credentials],
                                      extra: ["--s3-endpoint", moto.endpoint, "--s3-profile", "work"])
        XCTAssertEqual(fromProfile.status, 0, fromProfile.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/p.bin"), Shell.sha256(of: Data(bytes)))
        XCTAssertEqual(moto.requests().count(.refused), 0)
        try driver.unmount(mountpoint, cache: cache)

        let open = try startMoto(checkSignatures: false)
        try open.createBucket("pub")
        try open.put(bucket: "pub", key: "p.bin", bytes: bytes)
        try open.makePublic(bucket: "pub")
        let anonymousPoint = scratch.path + "/anonymous"
        let anonymous = try mountS3(["s3://pub/"], environment: [:], extra: ["--s3-endpoint", open.endpoint, "--s3-no-sign"],
                                    at: anonymousPoint, cache: scratch.path + "/cache2")
        XCTAssertEqual(anonymous.status, 0, anonymous.stderr)
        XCTAssertEqual(try Shell.sha256(of: anonymousPoint + "/p.bin"), Shell.sha256(of: Data(bytes)))
    }

    /// Acceptance 2, scaled down: a folder of 1,000 keys in pages of 100 costs exactly its 10 LIST requests for
    /// `ls -l`, and no HEAD or GET; a second `ls -l` costs nothing. Keys that cannot be names are left out with a
    /// log line: a key that is also a prefix shows as the folder; an empty segment is no name.
    func testAFolderIsListedOnePagePerRequestAndOddKeysFollowTheRules() throws {
        let moto = try startMoto(maxKeys: 100)
        try moto.createBucket("bkt")
        var objects = (0..<1_000).map { (key: "many/f\($0).txt", bytes: Array("\($0)\n".utf8)) }
        objects += [("odd/a", [1]), ("odd/a/b", [2]), ("odd//empty", [3]), ("odd/ok", [4])]
        try moto.put(bucket: "bkt", objects: objects)
        moto.clearRequestLog()
        let log = scratch.path + "/rangefs.log"
        XCTAssertEqual(try mountS3(["s3://bkt/"], environment: keys(moto),
                                   extra: ["--s3-endpoint", moto.endpoint, "--log-file", log]).status, 0)
        // The folder may be listed ahead (DirectoryService+WalkAhead.swift) or by the ls: either way, once.
        func listsOfMany() -> Int { moto.requests().filter { $0.kind == .list && $0.detail.contains("prefix=many/") }.count }
        let listing = try Shell.run("/bin/ls", ["-l", mountpoint + "/many"])
        XCTAssertEqual(listing.stdout.split(separator: "\n").count, 1_001, "1,000 files and the total line")
        XCTAssertEqual(listsOfMany(), 10, "one LIST per page of 100: \(moto.requestLog().prefix(20))")
        let requests = moto.requests()
        XCTAssertEqual(requests.count(.head) + requests.count(.get), 0, "sizes and dates come from the listing")
        _ = try Shell.run("/bin/ls", ["-l", mountpoint + "/many"])
        XCTAssertEqual(listsOfMany(), 10, "a second ls -l asks nothing")
        XCTAssertEqual(moto.requests().count(.head) + moto.requests().count(.get), 0)

        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/odd").sorted(), ["a", "ok"])
        var info = stat()
        XCTAssertEqual(stat(mountpoint + "/odd/a", &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR, "a key that is also a prefix: the folder")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint + "/odd/a"), ["b"])
        try driver.unmount(mountpoint, cache: cache)
        let logged = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(logged.contains("skipped the link 'a': a folder of the same name is shown instead"), logged)
    }

    /// Acceptance 1 on the second server: rclone serve s3 with --auth-key checks every signature over the strictly
    /// encoded path and query, and answers ranges with 200 and Content-Range. Keys with a space, UTF-8, `+`, `%`
    /// and `~()=&` list and read right; a wrong secret fails the mount in one line naming SignatureDoesNotMatch.
    func testABucketOfRcloneServeS3WithOddKeysMountsSignedAndReadsRight() throws {
        try skip(ObjectStoreInstall.rcloneMissing)
        let served = scratch.path + "/../\(UUID().uuidString)-served"
        try FileManager.default.createDirectory(atPath: served + "/bkt/data/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: served) }
        let files = ["a b.bin": randomBytes(150_000), "ünï cödé.txt": Array("unicode\n".utf8),
                     "p+q%r.bin": randomBytes(70_000), "t~(x)=y&z.txt": Array("odd\n".utf8),
                     "sub/deep.bin": randomBytes(2 << 20)]
        for (name, bytes) in files {
            XCTAssertTrue(FileManager.default.createFile(atPath: served + "/bkt/data/" + name, contents: Data(bytes)))
        }
        let key = (accessKeyID: "RANGEFSTESTKEY", secretAccessKey: "rclone/secret+\(getpid())")
        let rclone = try RcloneS3Server(scratch: scratch.path, folder: served, authKey: key)
        servers.append { rclone.stop() }
        checkRefusesUnsignedAndCounts(rclone.client, requests: rclone.requests, clear: rclone.clearRequestLog)
        let environment = ["AWS_ACCESS_KEY_ID": key.accessKeyID, "AWS_SECRET_ACCESS_KEY": key.secretAccessKey]
        let mounted = try mountS3(["s3://bkt/data/"], environment: environment, extra: ["--s3-endpoint", rclone.endpoint])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(),
                       ["a b.bin", "p+q%r.bin", "sub", "t~(x)=y&z.txt", "ünï cödé.txt"].sorted())
        for (name, bytes) in files {
            XCTAssertEqual(Int(try statFile(mountpoint + "/" + name).st_size), bytes.count, name)
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + name), Shell.sha256(of: Data(bytes)), name)
        }
        XCTAssertEqual(rclone.requests().count(.refused), 0, "every request signed right: \(rclone.requestLog())")
        try driver.unmount(mountpoint, cache: cache)

        let wrong = ["AWS_ACCESS_KEY_ID": key.accessKeyID, "AWS_SECRET_ACCESS_KEY": "wrong"]
        let refused = try mountS3(["s3://bkt/data/"], environment: wrong,
                                  extra: ["--s3-endpoint", rclone.endpoint], cache: scratch.path + "/cache-wrong")
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertEqual(problemLines(refused.stderr).count, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("SignatureDoesNotMatch"), refused.stderr)
    }

    /// `rangefs add s3://...` while mounted, and an fstab-shaped mount (`rangefs SOURCE M -o s3_endpoint=...`).
    func testRangefsAddAndTheFstabShapeTakeS3Sources() throws {
        let moto = try startMoto()
        try moto.createBucket("bkt")
        let one = randomBytes(10_000), two = randomBytes(20_000)
        try moto.put(bucket: "bkt", objects: [("data/one.bin", one), ("more/two.bin", two), ("more/sub/x", [1])])
        let mounted = try mountS3(["s3://bkt/data/one.bin"], environment: keys(moto), extra: ["--s3-endpoint", moto.endpoint])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/one.bin"), Shell.sha256(of: Data(one)))
        let added = try driver.run(["add", "s3://bkt/more/", "--mount", mountpoint])
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["more", "one.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/more/two.bin"), Shell.sha256(of: Data(two)))
        try driver.unmount(mountpoint, cache: cache)

        let fstabPoint = scratch.path + "/fstab"
        XCTAssertEqual(mkdir(fstabPoint, 0o755), 0)
        let variables = keys(moto).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let fstab = try Shell.run("/usr/bin/env", variables + [driver.binary, "s3://bkt/more/", fstabPoint, "-o",
                                                             "cache=\(scratch.path)/cache3,s3_endpoint=\(moto.endpoint)"])
        if driver.isMounted(fstabPoint) { driver.record(fstabPoint) }
        XCTAssertEqual(fstab.status, 0, fstab.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fstabPoint).sorted(), ["sub", "two.bin"])
    }
}

