// The credentials saved with the cache for remounts (`credentials.json`, mode 0600, replaced atomically). Apart
// from the saved set of files (Catalog/SavedSet.swift) because what it saves, `OriginCredentials`, is Fetch's type,
// and Catalog uses only Cache and System; FileSystem's own type, not an extension of the cache's store, which knows
// no credentials.

import FoundationEssentials
import RangeFSFetch
import RangeFSSystem

/// The credentials file of the cache at `cacheRoot` (CacheStore.root).
package struct SavedCredentials: Sendable {
    private let credentialsPath: String

    package init(cacheRoot: String) {
        credentialsPath = cacheRoot + "/credentials.json"
    }

    /// The credentials saved for remounts (per origin), or none. Kept in `credentials.json`, mode 0600: the one
    /// file of the cache that holds passwords and tokens (those of URLs and headers the user gave).
    /// An object store's key is kept as its id and the profile it came from, never its secret (ObjectStoreKey);
    /// a file an older rangefs wrote with secrets is written again without them at once.
    package func load() throws -> [String: OriginCredentials] {
        guard let bytes = try FileSystemCalls.readSmallFile(credentialsPath) else { return [:] }
        let saved = try JSONDecoder().decode([String: OriginCredentials].self, from: Data(bytes))
        let text = String(decoding: bytes, as: UTF8.self)
        if text.contains("\"secretAccessKey\"") || text.contains("\"sessionToken\"") { try save(saved) }
        return saved
    }

    /// Saves `credentials` for remounts; an empty table removes the file.
    package func save(_ credentials: [String: OriginCredentials]) throws {
        guard !credentials.isEmpty else { return try FileSystemCalls.removeFile(credentialsPath) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Its temporary file is created afresh with mode 0600 (replaceAtomically), never a leftover of another.
        try FileSystemCalls.replaceAtomically(credentialsPath, with: Array(try encoder.encode(credentials)))
    }
}
