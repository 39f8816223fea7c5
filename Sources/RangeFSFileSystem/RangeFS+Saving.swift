// The mounted set saved with the cache (`catalog.json`, through the mount's SavedSet) and the credentials kept for
// remounts (`credentials.json`), in step with the mount after each verb that changes them.
//
// Verbs run on several threads at once, and each `add` or `rm` that changes the credentials saves them: the
// snapshot is taken and written under one lock (`MountedSet.credentialsSaving`), or an older snapshot could be
// renamed over a newer one and a token be lost. A URL's query is kept per identity, which several files (two
// presigned URLs of one object), saved files and mirrors may share: it is forgotten only when none of them names
// it any more.
import RangeFSCatalog

extension RangeFS {
    /// Saves the mounted set with the cache: every file in the catalog, and the saved files not mounted this run.
    /// Pinned files are open (pinning opens them, and so does `restorePins`), so saving opens nothing.
    package func saveMountedSet() {
        do {
            try mountedSet.savedSet.save { [self] in
                // Files mounted one by one, and directory URLs (the root's with an empty name); not what listings
                // found, which the next mount lists again.
                let items = catalog.unlistedItems
                let pinned = Set(items.filter { store.openEntry(for: $0.metadata.url)?.isPinned ?? false }.map(\.inode))
                var files = items.map { item in
                    let mirrors = mirrors(of: item.metadata.url)
                    return SavedFile(name: catalog.path(of: item.inode), url: item.metadata.url,
                                     pinned: pinned.contains(item.inode) ? true : nil,
                                     mirrors: mirrors.isEmpty ? nil : mirrors,
                                     checksum: givenDigest(of: item.metadata.url)?.description,
                                     archives: showsArchives(of: item.metadata.url) ? true : nil)
                }
                files += catalog.directorySources.map { directory in
                    let url = directory.url ?? ""
                    return SavedFile(name: directory.name, url: url, archives: showsArchives(of: url) ? true : nil)
                }
                let mounted = Set(files.map(\.url))
                files += mountedSet.unmounted.filter { !mounted.contains($0.url) }
                return files
            }
        } catch {
            logger.error("cannot save the list of mounted files: \(error)")
        }
    }

    /// Saves the credentials as they are now for remounts; a failure is logged (the mount keeps working).
    func saveCredentials() {
        mountedSet.credentialsSaving.withLock { _ in
            do {
                try SavedCredentials(cacheRoot: store.root).save(credentials.snapshot)
            } catch {
                logger.error("cannot save the credentials for remounts: \(error)")
            }
        }
    }

    /// Drops the query kept for `url`, a file that left the mount, if nothing else names `url`, so credentials.json
    /// keeps no token nobody uses and never loses one a file still sends.
    func forgetQuery(of url: String) {
        // Checked and saved under the lock: a concurrent `rm` of the other name sharing it sees this one gone.
        mountedSet.credentialsSaving.withLock { _ in
            guard !isNamed(url), credentials.forgetQuery(of: url) else { return }
            do {
                try SavedCredentials(cacheRoot: store.root).save(credentials.snapshot)
            } catch {
                logger.error("cannot save the credentials for remounts: \(error)")
            }
        }
    }

    /// Whether a file of the mount, a directory URL, a saved file not mounted this run, a mirror of one of them, or
    /// an add in flight names `url` (an identity).
    private func isNamed(_ url: String) -> Bool {
        if !catalog.items(url: url).isEmpty || mountedSet.adding.withLock({ $0.contains(url) }) { return true }
        if catalog.directorySources.contains(where: { $0.url == url }) { return true }
        if mountedSet.unmounted.contains(where: { $0.url == url || ($0.mirrors ?? []).contains(url) }) { return true }
        // Mirrors are given with the files the user named, never with those a listing found.
        return catalog.unlistedItems.contains { mirrors(of: $0.metadata.url).contains(url) }
    }
}
