// Talks S3 to the test servers without rangefs: a small Python signer (ObjectStoreScripts.signer) computes the
// target and headers, and curl sends them. The secret stays in a 0600 file in the fixture's folder; only the access
// key ID and the signature reach a command line.

import Foundation
import Glibc
import RangeFSTestSupport

/// An S3 server's answer to one request from `S3TestClient`.
struct S3Response {
    var status: Int
    /// The header lines as received (`Name: value`), without the status line.
    var headers: [String]
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The first header `name` (matched without regard to case), or nil.
    func header(_ name: String) -> String? {
        for line in headers {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}

/// Sends path-style S3 requests to one endpoint with curl, signed with AWS Signature V4 (region us-east-1,
/// `UNSIGNED-PAYLOAD`) when it has a key, for tests that check a server or what rangefs left on it.
struct S3TestClient {
    /// `http://127.0.0.1:PORT`.
    let endpoint: String
    /// Where the signer script and the key file live; nil key file: no key, every request goes unsigned.
    private let folder: String
    private let keysFile: String?

    /// A client of `endpoint` whose files go in `folder` (created if missing); with a key, its secret is written
    /// there with mode 0600.
    init(endpoint: String, folder: String, accessKeyID: String?, secretAccessKey: String?) throws {
        self.endpoint = endpoint
        self.folder = folder
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try ObjectStoreScripts.signer.write(toFile: folder + "/s3_sign.py", atomically: true, encoding: .utf8)
        if let accessKeyID, let secretAccessKey {
            let path = folder + "/client.keys"
            try Self.writePrivately("\(accessKeyID) \(secretAccessKey)\n", to: path)
            keysFile = path
        } else {
            keysFile = nil
        }
    }

    /// Sends `method` for /`bucket`/`key` with `query` (names and values raw: the signer encodes them once) and
    /// `headers`; signed unless `signed` is false or the client has no key. Throws only when curl cannot run or
    /// connect; any HTTP status is an answer.
    func send(_ method: String, bucket: String, key: String = "", query: [(String, String)] = [],
              headers: [String: String] = [:], signed: Bool = true) throws -> S3Response {
        let hostPort = String(endpoint.dropFirst("http://".count))
        var signerArguments = [folder + "/s3_sign.py", hostPort, signed ? (keysFile ?? "-") : "-", method, bucket, key]
        signerArguments += query.map { "\($0.0)=\($0.1)" }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            signerArguments += ["--header", "\(name):\(value)"]
        }
        let signing = try Shell.run("/usr/bin/python3", signerArguments, timeout: 60)
        guard signing.status == 0 else { throw TestSupportError("the S3 test signer failed: \(signing.stderr)") }
        let lines = signing.stdout.split(separator: "\n").map(String.init)
        guard let target = lines.first else { throw TestSupportError("the S3 test signer printed nothing") }
        // Files of this request's own, removed after it: two requests at once cannot mix their answers, and no
        // answer can be read back as a later request's.
        let unique = UUID().uuidString
        let bodyPath = folder + "/\(unique).body", headerPath = folder + "/\(unique).headers"
        defer {
            unlink(bodyPath)
            unlink(headerPath)
        }
        // --path-as-is: the target is sent byte for byte as signed (curl would otherwise squash dot segments).
        var curlArguments = ["-sS", "--path-as-is", "-o", bodyPath, "-D", headerPath, "-w", "%{http_code}",
                             "--max-time", "60"]
        curlArguments += method == "HEAD" ? ["--head"] : ["-X", method]
        for line in lines.dropFirst() { curlArguments += ["-H", line] }
        let result = try Shell.run("/usr/bin/curl", curlArguments + [endpoint + target], timeout: 90)
        guard result.status == 0, let status = Int(result.stdout) else {
            throw TestSupportError("curl \(method) \(endpoint + target) failed (\(result.status)): \(result.stderr)")
        }
        let headerText = (try? String(contentsOfFile: headerPath, encoding: .utf8)) ?? ""
        let received = headerText.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).dropFirst().map(String.init)
        let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyPath))).map { [UInt8]($0) } ?? []
        return S3Response(status: status, headers: received, body: method == "HEAD" ? [] : body)
    }

    /// Writes `text` to a new file at `path` readable by its owner only (mode 0600 from the start, not chmod after).
    static func writePrivately(_ text: String, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else {
            throw TestSupportError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else {
            throw TestSupportError("cannot write \(path)")
        }
    }
}
