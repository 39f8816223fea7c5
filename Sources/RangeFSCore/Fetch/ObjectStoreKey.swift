// The key an object store (S3 and the stores that speak its API) knows a client by. The secret and the session
// token are secrets: nothing that prints a key (string interpolation, `String(reflecting:)`, `dump`, a failed
// XCTAssertEqual) may show them, so the key hides them from every description and from reflection.

/// An access key: the id, the secret, and a session token for temporary credentials (AWS STS).
struct ObjectStoreKey: Sendable, Equatable, Codable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable {
    var accessKeyID: String
    var secretAccessKey: String
    /// Sent as `x-amz-security-token` with every request when present.
    var sessionToken: String?
    /// The profile it was read from, to read it again when the file changes (AWSProfile.swift); nil for a key
    /// from the environment, which a running mount cannot read again.
    var source: ObjectStoreKeySource?

    init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The key id and whether a token is present: what a log line may show.
    var description: String {
        "access key \(accessKeyID)" + (sessionToken == nil ? "" : " (with a session token)")
    }

    var debugDescription: String { "ObjectStoreKey(\(description))" }

    /// Only the key id: without this, `dump` and debuggers would walk the stored properties, the secret among them.
    var customMirror: Mirror { Mirror(self, children: ["accessKeyID": accessKeyID], displayStyle: .struct) }
}
