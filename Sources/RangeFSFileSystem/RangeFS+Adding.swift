// `rangefs add URL`: the verb that adds a file or a directory URL to a running mount (issue 48: the whole
// operation is here, in the core; the control service only carries its answer).
//
// Adding a file saves the mounted set with the cache, so a restart shows the same files. A URL's user, password
// and query go to the credentials, which its probe needs; they are saved for remounts only once a file holds
// them, and a failed add takes them back, so no token that reached no file is kept.
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension RangeFS {
    /// Adds the file or directory at `given` (a URL as the user gave it) with its `mirrors`, its `checksum`
    /// (`sha256=HEX`), an explicit `name`, and with `archives` shown as its archive's folder.
    package func add(url given: String?, mirrors givenMirrors: [String] = [], checksum: String? = nil,
                    name: String? = nil, archives: Bool = false) -> VerbOutcome {
        guard let given, !given.isEmpty else { return .failed("add needs a URL") }
        if let name, let problem = EntryNaming.problem(withExplicitName: name) {
            return .failed("the name '\(name)' cannot name a file (\(problem)); give a plain file name")
        }
        // The URL the mount knows the file by: without its user and password and its query's values (an object
        // store's: its https URL).
        let url = credentials.identity(of: given)
        // Claimed before the check: two adds of one URL at once make one file (and never undo each other's token).
        guard mountedSet.adding.withLock({ $0.insert(url).inserted }) else {
            return .failed("\(Redaction.redact(url)) is being added by another rangefs add; see rangefs status")
        }
        defer { mountedSet.adding.withLock { _ = $0.remove(url) } }
        let before = credentials.snapshot
        let newCredentials = credentials.adopt(given).changed
        let adoptedMirrors = givenMirrors.map { credentials.adopt($0) }
        // Marked before the file is added, so its first getattr already shows a folder; unmarked if it is not.
        let marking = archives && !showsArchives(of: url) && catalog.item(url: url) == nil
        if marking { showArchives(of: url) }
        let (outcome, added) = add(identity: url, newCredentials: newCredentials,
                                   mirrors: adoptedMirrors.map(\.url), checksum: checksum, name: name)
        if marking && !added { stopShowingArchives(of: url) }
        if newCredentials || adoptedMirrors.contains(where: \.changed) {
            if added {
                saveCredentials()
            } else {
                // A login is per origin: one that another add in flight may be using stays.
                let origins = mountedSet.adding.withLock { $0.subtracting([url]).compactMap(URLOrigin.of) }
                for adopted in [given] + givenMirrors {
                    let login = !origins.contains { $0 == URLOrigin.of(adopted) }
                    credentials.restore(adopted, from: before, login: login)
                }
            }
        }
        return outcome
    }

    /// Adds the file or directory at `url` (an identity, claimed in `adding`); returns the answer, and whether the
    /// mount now holds it (an answer may report a failure of a file that was added all the same).
    private func add(identity url: String, newCredentials: Bool, mirrors: [String], checksum: String?,
                     name: String?) -> (VerbOutcome, added: Bool) {
        if let existing = catalog.item(url: url) {
            // The same URL with a new login or query (a presigned URL issued again): its requests use them now.
            if newCredentials { return (.done(existing.name + " (new credentials)"), true) }
            return (.failed("\(Redaction.redact(url)) is already mounted as \(existing.name)"), false)
        }
        if url.hasSuffix("/") { return addDirectory(url: url, name: name) }
        let unmounted = mountedSet.unmounted
        let wasSaved = unmounted.contains { $0.url == url }
        let result = scheduler.fetcher.probeAll([url])[0].map(store.settled)
        let metadata: RemoteMetadata
        var note = ""
        switch ProbeOutcome.judge(result, stored: { store.storedMetadata(for: url) }, wasSaved: wasSaved) {
        case .directory(let directoryURL):
            return addDirectory(url: directoryURL, name: name)
        case .gone(let error), .failed(let error, keepSaved: false):
            return (.failed("\(Redaction.redact(url)): \(error.userMessage)"), false)
        case .failed(let error, keepSaved: true):
            let savedName = unmounted.first { $0.url == url }?.name ?? "NAME"
            return (.failed("\(Redaction.redact(url)): \(error.userMessage). It stays in this cache's saved list; "
                            + "rangefs rm \(savedName) drops it"), false)
        case .online(let fresh):
            metadata = fresh
            revalidator.markValidated(url)
        case .offline(let stored, let reason):
            // Its server cannot be reached, but the cache holds it: served from there, checked again until it answers.
            metadata = stored
            revalidator.markOffline(url, reason: reason)
            note = " (its server cannot be reached: \(reason); served from the cache until it answers)"
        }
        let item = catalog.add(metadata, explicitName: name)
        configure(metadata, mirrors: mirrors, checksum: checksum)
        if let whole = EntryNaming.overlongName(explicit: name, metadata: metadata) {
            logger.warning("the name '\(whole.prefix(40))…' is \(whole.utf8.count) bytes, more than a file name can hold (255); it is shortened to '\(item.name.prefix(40))…'")
        }
        mountedSet.mounted(url)
        saveMountedSet()
        if prefetch == .all && note.isEmpty {
            do {
                scheduler.fill(try entry(for: item), url: url)
            } catch {
                return (.failed("added \(item.name), but its download cannot start: \(error); see rangefs status"), true)
            }
        }
        return (.done(item.name + note), true)
    }

    /// Adds a directory URL: listed on its first visit, like any other; returns whether the mount holds it now.
    private func addDirectory(url: String, name: String?) -> (VerbOutcome, added: Bool) {
        if let existing = catalog.directorySources.first(where: { $0.url == url }) {
            return (.failed("\(Redaction.redact(url)) is already mounted as \(existing.name)/"), false)
        }
        let directory = catalog.addDirectory(url: url, explicitName: name)
        // Listed before the answer, so that a directory that cannot be listed is an error here, not an empty
        // folder found later.
        var note = ""
        switch listNow(directory.inode) {
        case .listed: break
        case .kept(let reason):
            note = " (its server cannot be reached: \(reason); it shows the listing kept from an earlier visit)"
        case .failed(let reason, _):
            catalog.removeNode(directory.inode)
            return (.failed("\(Redaction.redact(url)): \(reason)"), false)
        }
        saveMountedSet()
        return (.done(directory.name + "/" + note), true)
    }
}
