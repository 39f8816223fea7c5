// The set of mounted URLs, saved with the cache (`catalog.json`, replaced atomically) so that a restart on the
// same cache shows the same files, including those added at runtime and without those removed. SavedSet.swift
// reads and writes it; what else a mount keeps with the cache (versions, listings) is the cache's
// (CacheStore+KeptRecords.swift).

/// One saved file: its name in the mount, its URL and its mirrors.
public struct SavedFile: Codable, Sendable, Equatable {
    public var name: String
    public var url: String
    /// Pinned with `rangefs pin`: kept complete and never evicted.
    package var pinned: Bool?
    /// Other URLs of the same file, given by the user; absent when none (and in lists an older rangefs saved).
    public var mirrors: [String]?
    /// The file's digest as the user gave it (`sha256=HEX`); absent when none.
    public var checksum: String?
    /// Given with `archives` (a list-file line or `rangefs add`): shown as its archive's folder, or for a directory
    /// URL its archives, without `--archives`; absent when not (and in lists an older rangefs saved).
    public var archives: Bool?

    public init(name: String, url: String, pinned: Bool? = nil, mirrors: [String]? = nil, checksum: String? = nil,
                archives: Bool? = nil) {
        self.name = name
        self.url = url
        self.pinned = pinned
        self.mirrors = mirrors
        self.checksum = checksum
        self.archives = archives
    }
}
