// The key an object store (S3 and the stores that speak its API) knows a client by. The secret and the session
// token are secrets: nothing that prints a key (string interpolation, `String(reflecting:)`, `dump`, a failed
// XCTAssertEqual) may show them, so the key hides them from every description and from reflection.
//
// Nor are they written to disk. A key is saved with the cache (credentials.json) as where it came from: its id and
// the profile it was read from, or no profile for a key from the environment. A remount reads the profile again,
// or takes the environment's key again (CredentialTable.takeKeptKeys); until then the key is `missing`.

/// An access key: the id, the secret, and a session token for temporary credentials (AWS STS).
package struct ObjectStoreKey: Sendable, Equatable, Codable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable {
    package var accessKeyID: String
    package var secretAccessKey: String
    /// Sent as `x-amz-security-token` with every request when present.
    package var sessionToken: String?
    /// The profile it was read from, to read it again when the file changes (AWSProfile.swift); nil for a key
    /// from the environment, which a running mount cannot read again.
    package var source: ObjectStoreKeySource?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The key id and whether a token is present: what a log line may show.
    package var description: String {
        "access key \(accessKeyID)" + (sessionToken == nil ? "" : " (with a session token)")
    }

    package var debugDescription: String { "ObjectStoreKey(\(description))" }

    /// Whether the secret is unknown: a key read back from credentials.json, which keeps no secret.
    package var isMissing: Bool { secretAccessKey.isEmpty }

    private enum CodingKeys: String, CodingKey {
        case accessKeyID, source
    }

    /// Reads a key as saved: its id and source; the secret and token stay unknown (`isMissing`). A file an older
    /// rangefs wrote holds them, and they are ignored: the profile or the environment gives them again.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessKeyID = try container.decode(String.self, forKey: .accessKeyID)
        secretAccessKey = ""
        source = try container.decodeIfPresent(ObjectStoreKeySource.self, forKey: .source)
    }

    /// Saves the id and the source only: never the secret or the session token.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessKeyID, forKey: .accessKeyID)
        try container.encodeIfPresent(source, forKey: .source)
    }

    /// Only the key id: without this, `dump` and debuggers would walk the stored properties, the secret among them.
    package var customMirror: Mirror { Mirror(self, children: ["accessKeyID": accessKeyID], displayStyle: .struct) }
}
