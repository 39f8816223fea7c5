// A certificate authority made for one test with openssl: a CA, a server certificate for 127.0.0.1 and
// localhost that it signed, and a client certificate it signed. Nothing is trusted system-wide.

import Foundation

public final class TestCertificates: @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    /// What a server needs: its certificate and key, and the CA whose client certificates it accepts (if any).
    public struct Server: Sendable {
        public var certificate: String
        public var key: String
        public var clientCA: String?
    }

    public let folder: TemporaryDirectory
    /// The CA's certificate (PEM): what `--cacert` takes.
    public var caCertificate: String { folder.path + "/ca.pem" }
    public var clientCertificate: String { folder.path + "/client.pem" }
    public var clientKey: String { folder.path + "/client.key" }
    public var server: Server { Server(certificate: folder.path + "/server.pem", key: folder.path + "/server.key") }
    /// The server, asking clients for a certificate from this CA.
    public var serverRequiringClients: Server {
        Server(certificate: server.certificate, key: server.key, clientCA: caCertificate)
    }

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw TestSupportError("openssl is not installed; run mount-scripts/install-deps.sh")
        }
        folder = try TemporaryDirectory(prefix: "ca")
        let path = folder.path
        try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=rangefs test CA",
                          "-keyout", path + "/ca.key", "-out", path + "/ca.pem"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: path + "/server.ext", atomically: false,
                                                                 encoding: .utf8)
        try sign(name: "server", subject: "/CN=127.0.0.1", extensions: path + "/server.ext")
        try sign(name: "client", subject: "/CN=rangefs test client", extensions: nil)
    }

    private func sign(name: String, subject: String, extensions: String?) throws {
        let path = folder.path
        try Self.openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", "\(path)/\(name).key",
                          "-out", "\(path)/\(name).csr"])
        try Self.openssl(["x509", "-req", "-in", "\(path)/\(name).csr", "-CA", caCertificate, "-CAkey", path + "/ca.key",
                          "-CAcreateserial", "-days", "2", "-out", "\(path)/\(name).pem"]
                         + (extensions.map { ["-extfile", $0] } ?? []))
    }

    private static func openssl(_ arguments: [String]) throws {
        let result = try Shell.run("/usr/bin/openssl", arguments)
        guard result.status == 0 else { throw TestSupportError("openssl \(arguments[0]) failed: \(result.stderr)") }
    }
}
