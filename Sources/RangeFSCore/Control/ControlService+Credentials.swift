// Keeping credentials.json in step with the mount. Control requests run on several threads at once, and each
// `add` or `rm` that changes the credentials saves them: the snapshot is taken and written under one lock, or an
// older snapshot could be renamed over a newer one and a token be lost. A URL's query is kept per identity, which
// several files (two presigned URLs of one object), saved files and mirrors may share: it is forgotten only when
// none of them names it any more.
//
// Lock order: `credentialsSaving` first, then the catalog's, `adding`, the saved files', the mirrors' and the
// credential table's own locks, each taken alone and never held while waiting for `credentialsSaving`.

import Synchronization

extension ControlService {
    /// Saves the credentials as they are now for remounts; a failure is logged (the mount keeps working).
    func saveCredentials() {
        credentialsSaving.withLock { _ in
            do {
                try store.saveCredentials(fileSystem.credentials.snapshot)
            } catch {
                logger.error("cannot save the credentials for remounts: \(error)")
            }
        }
    }

    /// Drops the query kept for `url`, a file that left the mount, if nothing else names `url`, so credentials.json
    /// keeps no token nobody uses and never loses one a file still sends.
    func forgetQuery(of url: String) {
        // Checked and saved under the lock: a concurrent `rm` of the other name sharing it sees this one gone.
        credentialsSaving.withLock { _ in
            guard !isNamed(url), fileSystem.credentials.forgetQuery(of: url) else { return }
            do {
                try store.saveCredentials(fileSystem.credentials.snapshot)
            } catch {
                logger.error("cannot save the credentials for remounts: \(error)")
            }
        }
    }

    /// Whether a file of the mount, a directory URL, a saved file not mounted this run, a mirror of one of them, or
    /// an add in flight names `url` (an identity).
    private func isNamed(_ url: String) -> Bool {
        if !catalog.items(url: url).isEmpty || adding.withLock({ $0.contains(url) }) { return true }
        if catalog.directorySources.contains(where: { $0.url == url }) { return true }
        if unmountedFiles.contains(where: { $0.url == url || ($0.mirrors ?? []).contains(url) }) { return true }
        // Mirrors are given with the files the user named, never with those a listing found.
        return catalog.unlistedItems.contains { fileSystem.mirrors(of: $0.metadata.url).contains(url) }
    }
}
