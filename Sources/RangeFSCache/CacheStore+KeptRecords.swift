// What a mount keeps with the cache besides the entries: the versions entries remember (to mount offline), the
// listings of directories last read, and the moves and removals of whole entries. The saved set of files is
// Catalog's (SavedFile.swift, SavedSet.swift), the saved credentials FileSystem's (SavedCredentials.swift).

import FoundationEssentials
import Glibc
import RangeFSSystem

extension CacheStore {
    /// What the cache entry of `url` says about it when it was last reached (size, date, validator), if there is
    /// an entry with a readable header for exactly this URL: enough to mount it while its server is unreachable.
    public func storedMetadata(for url: String) -> RemoteMetadata? {
        // No header, or an unreadable one, is no stored version: the URL is probed as if never cached, and
        // `rangefs verify` is what reports a damaged entry.
        storedEntry(for: url)?.header.remoteMetadata
    }

    /// `metadata` as a probe found it, with the size of the complete entry of the same content when the server
    /// sent no length: a file of unknown size that was streamed to its end once is an ordinary file from then on.
    public func settled(_ metadata: RemoteMetadata) -> RemoteMetadata {
        guard !metadata.sizeKnown, let stored = storedMetadata(for: metadata.url),
              stored.describesSameContent(as: metadata) else { return metadata }
        var known = stored
        known.suggestedName = metadata.suggestedName
        return known
    }

    /// Where the last listing of directory `url` is kept, so that a tree stays browsable while its server is down.
    private func listingPath(for url: String) -> String {
        root + "/listings/" + String(SHA256.hexDigest(url).prefix(32))
    }

    /// Keeps `body`, the listing of directory `url` just read (replacing the one before); the caller has taken
    /// the values of its links' queries out (ListingRedaction).
    package func saveListing(_ body: [UInt8], for url: String) throws {
        try FileSystemCalls.makeDirectories(root + "/listings")
        try FileSystemCalls.replaceAtomically(listingPath(for: url), with: body)
    }

    /// The largest kept listing read back: the largest listing a mount reads (a million objects' records, 122
    /// bytes each for short names). Below it, a million-object tree kept at 64 MiB was silently not kept at all.
    package static let keptListingLimit = 256 << 20

    /// The last listing kept for directory `url`, if any.
    package func savedListing(for url: String) -> [UInt8]? {
        // An unreadable kept listing is as if none was kept: the directory is listed from its server, and a
        // failure to do so is what the user sees.
        (try? FileSystemCalls.readSmallFile(listingPath(for: url), limit: Self.keptListingLimit)) ?? nil
    }

    /// How many seconds ago the listing kept for directory `url` was read, if one is kept.
    package func savedListingAge(for url: String) -> Double? {
        var info = stat()
        guard stat(listingPath(for: url), &info) == 0 else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        // A file dated in the future (the clock was set back) says nothing of when it was read.
        guard info.st_mtim.tv_sec <= now.tv_sec else { return nil }
        return Double(now.tv_sec - info.st_mtim.tv_sec)
    }

    /// Moves the entry an older rangefs kept under `oldURL` (a URL with `user:password@`) to `url`, the same URL
    /// without them, so its cached data stays; rewrites its header without the credentials. Does nothing if there
    /// is no such entry, or `url` has one already. Such an entry is a v1 folder (an older rangefs made no other):
    /// moved as it is, it is migrated to v2 when it is opened (CacheStore+Migration.swift).
    public func moveEntry(from oldURL: String, to url: String) throws {
        let old = directory(for: oldURL)
        let new = directory(for: url)
        guard oldURL != url, access(new, F_OK) != 0, case .none = entryFiles(for: url).load(),
              let bytes = try FileSystemCalls.readSmallFile(old + "/header") else { return }
        var header = try CacheHeader.decode(bytes)
        header.url = url
        try FileSystemCalls.replaceAtomically(old + "/header", with: header.encoded())
        guard rename(old, new) == 0 else { throw SystemError(call: "rename", path: old) }
        try FileSystemCalls.synchronizeDirectory(containing: new)
        forgetSummary(of: url)  // a lookup before the move remembered it as holding nothing
    }

    /// Deletes the cached data of `url` (its entry's files, in either layout, a download's stream, and the index
    /// kept if it is an archive). Handles still open keep reading the old files.
    package func removeEntry(for url: String) throws {
        let files = entryFiles(for: url)
        close(url, committing: false)
        try files.removeFiles()
        for file in ["stream", "stream-state"] { try FileSystemCalls.removeFile(files.legacyFolder + "/" + file) }
        try removeLegacyFiles(files.legacyFolder)
        try removeArchiveIndex(for: url)
        // Again once the files are gone: a status that read their summary meanwhile (after `close` forgot it)
        // would otherwise keep showing the data as cached (issue 50: an evict from the page, which polls status).
        forgetSummary(of: url)
    }
}
