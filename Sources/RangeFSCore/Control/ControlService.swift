// Folder Control/: what `rangefs status|add|rm|...` asks of a running mount, and the wire protocol. It may use
// everything in the core; nothing in the core uses it but the executable.
//
// What the control channel can ask of a running mount (`rangefs status|add|rm|pause|resume|verify`).
//
// Status is in ControlService+Status.swift. Adding and removing files saves the mounted set with the cache, so a restart
// shows the same files. Every command reports what really happened: an error that stops part of its work is in
// its answer, not only in the log.

import Dispatch
import Glibc
import Logging
import Synchronization

/// Answers the control channel's requests for one mounted file system, and keeps the mounted set saved with the
/// cache (the files given or added, and the saved ones not mounted this run).
public final class ControlService: Sendable {
    let fileSystem: RangeFS
    /// Saved files not mounted this run (unreachable, nothing cached): they stay in the saved set.
    private let unmountedSaved = Mutex<[SavedFile]>([])
    /// The one writer of the saved set (SavedSet.swift), the mount's.
    let savedSet: SavedSet
    /// URLs being added: two `rangefs add` of one URL at once make one file.
    let adding = Mutex<Set<String>>([])
    /// Serializes saves of the credentials: each takes its snapshot and writes it while no other does, so an
    /// older snapshot is never renamed over a newer one (ControlService+Credentials.swift).
    let credentialsSaving = Mutex(())

    /// Serves `fileSystem`; `unmounted` are the saved files its mount left out (see `unmountedFiles`); `savedSet`
    /// the mount's writer of the saved set (nil: the cache's, made here, for a file system no mount made).
    package init(fileSystem: RangeFS, unmounted: [SavedFile] = [], savedSet: SavedSet? = nil) {
        self.fileSystem = fileSystem
        self.savedSet = savedSet ?? SavedSet(store: fileSystem.store)
        unmountedSaved.withLock { $0 = unmounted }
    }

    var catalog: Catalog { fileSystem.catalog }
    var store: CacheStore { fileSystem.store }
    var scheduler: FetchScheduler { fileSystem.scheduler }
    var logger: Logger { fileSystem.logger }

    /// The saved files that are not mounted this run.
    var unmountedFiles: [SavedFile] {
        unmountedSaved.withLock { $0 }
    }

    /// Answers one control request. Requests may come on several threads at once: a slow `add` does not hold up
    /// a `status`.
    public func handle(_ request: ControlRequest) -> ControlResponse {
        switch request.command {
        case .status: return request.active == true ? activeStatus() : status(all: request.all ?? false)
        case .add: return add(url: request.url, mirrors: request.mirrors ?? [], checksum: request.checksum,
                              name: request.name, archives: request.archives ?? false)
        case .rm: return remove(name: request.name, keepData: request.keepData ?? false)
        case .pause, .resume: return setPaused(request.command == .pause, name: request.name, all: request.all ?? false)
        case .verify: return verify(name: request.name)
        case .pin: return pin(name: request.name)
        case .evict: return evict(name: request.name)
        case .identify: return ControlResponse(ok: true, pid: getpid())
        case .metrics: return ControlResponse(ok: true, message: fileSystem.metrics.prometheusText)
        case .blockmap: return blockMap(name: request.name, width: request.width ?? Self.mapWidth)
        }
    }

    // MARK: Changing the set of files

    private func add(url given: String?, mirrors givenMirrors: [String], checksum: String?,
                     name: String?, archives: Bool) -> ControlResponse {
        guard let given, !given.isEmpty else { return .failure("add needs a URL") }
        if let name, let problem = EntryNaming.problem(withExplicitName: name) {
            return .failure("the name '\(name)' cannot name a file (\(problem)); give a plain file name")
        }
        // The URL the mount knows the file by: without its user and password and its query's values (an object
        // store's: its https URL).
        let url = fileSystem.credentials.identity(of: given)
        // Claimed before the check: two adds of one URL at once make one file (and never undo each other's token).
        guard adding.withLock({ $0.insert(url).inserted }) else {
            return .failure("\(Redaction.redact(url)) is being added by another rangefs add; see rangefs status")
        }
        defer { adding.withLock { _ = $0.remove(url) } }
        // Its user, password and query go to the credentials, which its probe needs; they are saved for remounts
        // only once a file holds them, and a failed add takes them back, so no token that reached no file is kept.
        let before = fileSystem.credentials.snapshot
        let newCredentials = fileSystem.credentials.adopt(given).changed
        let adoptedMirrors = givenMirrors.map { fileSystem.credentials.adopt($0) }
        // Marked before the file is added, so its first getattr already shows a folder; unmarked if it is not.
        let marking = archives && !fileSystem.showsArchives(of: url) && catalog.item(url: url) == nil
        if marking { fileSystem.showArchives(of: url) }
        let (response, added) = add(identity: url, newCredentials: newCredentials,
                                    mirrors: adoptedMirrors.map(\.url), checksum: checksum, name: name)
        if marking && !added { fileSystem.stopShowingArchives(of: url) }
        if newCredentials || adoptedMirrors.contains(where: \.changed) {
            if added {
                saveCredentials()
            } else {
                // A login is per origin: one that another add in flight may be using stays.
                let origins = adding.withLock { $0.subtracting([url]).compactMap(URLOrigin.of) }
                for adopted in [given] + givenMirrors {
                    let login = !origins.contains { $0 == URLOrigin.of(adopted) }
                    fileSystem.credentials.restore(adopted, from: before, login: login)
                }
            }
        }
        return response
    }

    /// Adds the file or directory at `url` (an identity, claimed in `adding`); returns the answer, and whether the
    /// mount now holds it (an answer may report a failure of a file that was added all the same).
    private func add(identity url: String, newCredentials: Bool, mirrors: [String], checksum: String?,
                     name: String?) -> (ControlResponse, added: Bool) {
        if let existing = catalog.item(url: url) {
            // The same URL with a new login or query (a presigned URL issued again): its requests use them now.
            if newCredentials { return (ControlResponse(ok: true, message: existing.name + " (new credentials)"), true) }
            return (.failure("\(Redaction.redact(url)) is already mounted as \(existing.name)"), false)
        }
        if url.hasSuffix("/") { return addDirectory(url: url, name: name) }
        let wasSaved = unmountedFiles.contains { $0.url == url }
        let result = scheduler.fetcher.probeAll([url])[0].map(store.settled)
        let metadata: RemoteMetadata
        var note = ""
        switch ProbeOutcome.judge(result, stored: { store.storedMetadata(for: url) }, wasSaved: wasSaved) {
        case .directory(let directoryURL):
            return addDirectory(url: directoryURL, name: name)
        case .gone(let error), .failed(let error, keepSaved: false):
            return (.failure("\(Redaction.redact(url)): \(error.userMessage)"), false)
        case .failed(let error, keepSaved: true):
            return (.failure("\(Redaction.redact(url)): \(error.userMessage). It stays in this cache's saved list; rangefs rm \(unmountedFiles.first { $0.url == url }?.name ?? "NAME") drops it"), false)
        case .online(let fresh):
            metadata = fresh
            fileSystem.revalidator.markValidated(url)
        case .offline(let stored, let reason):
            // Its server cannot be reached, but the cache holds it: served from there, checked again until it answers.
            metadata = stored
            fileSystem.revalidator.markOffline(url, reason: reason)
            note = " (its server cannot be reached: \(reason); served from the cache until it answers)"
        }
        let item = catalog.add(metadata, explicitName: name)
        fileSystem.configure(metadata, mirrors: mirrors, checksum: checksum)
        if let whole = EntryNaming.overlongName(explicit: name, metadata: metadata) {
            logger.warning("the name '\(whole.prefix(40))…' is \(whole.utf8.count) bytes, more than a file name can hold (255); it is shortened to '\(item.name.prefix(40))…'")
        }
        unmountedSaved.withLock { $0.removeAll { $0.url == url } }
        saveCatalog()
        if fileSystem.prefetch == .all && note.isEmpty {
            do {
                scheduler.fill(try fileSystem.entry(for: item), url: url)
            } catch {
                return (.failure("added \(item.name), but its download cannot start: \(error); see rangefs status"), true)
            }
        }
        return (ControlResponse(ok: true, message: item.name + note), true)
    }

    /// Adds a directory URL: listed on its first visit, like any other; returns whether the mount holds it now.
    private func addDirectory(url: String, name: String?) -> (ControlResponse, added: Bool) {
        if let existing = catalog.directorySources.first(where: { $0.url == url }) {
            return (.failure("\(Redaction.redact(url)) is already mounted as \(existing.name)/"), false)
        }
        let directory = catalog.addDirectory(url: url, explicitName: name)
        // Listed before the answer, so that a directory that cannot be listed is an error here, not an empty
        // folder found later.
        var note = ""
        switch fileSystem.listNow(directory.inode) {
        case .listed: break
        case .kept(let reason):
            note = " (its server cannot be reached: \(reason); it shows the listing kept from an earlier visit)"
        case .failed(let reason, _):
            catalog.removeNode(directory.inode)
            return (.failure("\(Redaction.redact(url)): \(reason)"), false)
        }
        saveCatalog()
        return (ControlResponse(ok: true, message: directory.name + "/" + note), true)
    }

    private func remove(name: String?, keepData: Bool) -> ControlResponse {
        if let name, catalog.item(named: name) == nil,
           let saved = unmountedSaved.withLock({ files -> SavedFile? in
               guard let index = files.firstIndex(where: { FileName.same($0.name, name) }) else { return nil }
               return files.remove(at: index)
           }) {
            fileSystem.stopShowingArchives(of: saved.url)
            saveCatalog()
            forgetQuery(of: saved.url)
            if !keepData {
                do {
                    try store.removeEntry(for: saved.url)
                } catch {
                    return .failure("removed \(name), but its cached data could not be deleted: \(error)")
                }
            }
            return ControlResponse(ok: true, message: name)
        }
        guard let name, let item = catalog.remove(named: name) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        fileSystem.revalidator.forget(item.metadata.url)
        fileSystem.stopShowingArchives(of: item.metadata.url)
        // Through the one queue, and sent before the answer: a name looked up after `rangefs rm` returns is gone.
        fileSystem.kernel.forgetName(item.name, in: item.parent)
        fileSystem.kernel.flush()
        if let open = store.openEntry(for: item.metadata.url) { scheduler.stopFilling(open) }
        saveCatalog()
        forgetQuery(of: item.metadata.url)
        do {
            if keepData { store.forget(item.metadata.url) } else { try store.removeEntry(for: item.metadata.url) }
        } catch {
            return .failure("removed \(name), but its cached data could not be deleted: \(error)")
        }
        return ControlResponse(ok: true, message: name)
    }

    /// Pauses or resumes one file by name, or with `all` every file that has something to download: those whose
    /// entry is open (a file nobody opened downloads nothing; pausing all of 10,000 files opens none of them).
    private func setPaused(_ paused: Bool, name: String?, all: Bool) -> ControlResponse {
        let items: [CatalogItem]
        if all {
            items = catalog.items.filter { $0.metadata.sizeKnown && store.openEntry(for: $0.metadata.url) != nil }
        } else {
            guard let name, let item = catalog.item(named: name) else {
                return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
            }
            guard item.metadata.sizeKnown else {
                return .failure("\(name) has no known size yet (its server sends no length); it downloads only while read")
            }
            items = [item]
        }
        var failures: [String] = []
        for item in items {
            let entry: CacheEntry
            do {
                entry = try fileSystem.entry(for: item)
            } catch {
                failures.append("\(item.name): \(error)")
                continue
            }
            entry.setPaused(paused)
            if paused {
                scheduler.stopFilling(entry)
            } else if fileSystem.prefetch != .none && !entry.isComplete {
                scheduler.fill(entry, url: item.metadata.url)
            }
        }
        if !paused { scheduler.wakeTransfers() }
        guard failures.isEmpty else {
            return .failure("cannot \(paused ? "pause" : "resume") \(failures.joined(separator: "; "))")
        }
        return ControlResponse(ok: true, message: all && items.isEmpty ? "nothing is downloading"
                                   : items.map(\.name).joined(separator: ", "))
    }

    private func pin(name: String?) -> ControlResponse {
        guard let name, let item = catalog.item(named: name) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        guard item.metadata.sizeKnown else {
            return .failure("\(name) has no known size yet (its server sends no length); read it to its end once, then pin it")
        }
        let entry: CacheEntry
        do {
            entry = try fileSystem.entry(for: item)
        } catch {
            return .failure("cannot pin \(name): \(error)")
        }
        // A pinned file is kept whole and never evicted: one larger than the cap cannot be (issue 45).
        if !entry.isPinned, let refusal = store.ledger.refusalToFill(entry) {
            return .failure("cannot pin \(name): its \(CacheCloseReport.bytes(entry.size)) do not fit under \(refusal.room); "
                            + "raise --cache-max-size, or pin a smaller file")
        }
        entry.setPinned(true)
        entry.setPaused(false)
        if !entry.isComplete { scheduler.fill(entry, url: item.metadata.url) }
        saveCatalog()
        return ControlResponse(ok: true, message: name)
    }

    private func evict(name: String?) -> ControlResponse {
        guard let name, let item = catalog.item(named: name) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        if fileSystem.isOpen(item.inode) { return .failure("\(name) is open; close it before evicting its data") }
        if let open = store.openEntry(for: item.metadata.url) {
            if open.isPinned { return .failure("\(name) is pinned; it is never evicted") }
            scheduler.stopFilling(open)
        }
        if fileSystem.isStreaming(item.metadata.url) {
            return .failure("\(name) is being streamed; wait for its end before evicting its data")
        }
        do {
            try store.removeEntry(for: item.metadata.url)
        } catch {
            return .failure("cannot delete the cached data of \(name): \(error)")
        }
        return ControlResponse(ok: true, message: name)
    }

    /// Checks the cached blocks of the file `name`, found the way an open finds it (RangeFS+Verification.swift):
    /// nothing is dropped without an answer from its server that shows a change.
    private func verify(name: String?) -> ControlResponse {
        guard let name else { return .failure("name the file to verify; see rangefs status") }
        let found = LockedBox<Result<CatalogItem, FileSystemError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        fileSystem.findForReading(name) { result in
            found.withLock { $0 = result }
            done.signal()
        }
        // A listing or a probe on the way has its own timeouts; this bound only keeps the control thread free.
        guard done.wait(timeout: .now() + Self.verifyLookupLimit) == .success, let result = found.withLock({ $0 }) else {
            return .failure("cannot verify \(name): its directory or its server did not answer within "
                            + "\(Int(Self.verifyLookupLimit)) s; try again")
        }
        let item: CatalogItem
        switch result {
        case .success(let validated): item = validated
        case .failure(.notFound), .failure(.notADirectory):
            return .failure("no file named '\(name)' in this mount; see rangefs status")
        case .failure(.isADirectory):
            return .failure("\(name) is a directory; name one of its files")
        case .failure(.io(let reason)):
            return .failure("cannot verify \(name): \(reason)")
        case .failure(let error):
            return .failure("cannot verify \(name): \(error)")
        }
        let checked: Int, failed: Int
        do {
            (checked, failed) = try fileSystem.verifyBlocks(of: item)
        } catch {
            return .failure("cannot verify \(name): \(error)")
        }
        if checked == 0 {
            return ControlResponse(ok: true, message: "\(name): no block is cached yet; nothing to check")
        }
        let what = "\(checked) blocks checked against the CRC32C taken when they arrived"
        let verdict = failed == 0 ? "all good" : "\(failed) failed and will be fetched again"
        return ControlResponse(ok: failed == 0, error: failed == 0 ? nil : "\(name): \(what), \(verdict)",
                               message: "\(name): \(what), \(verdict)")
    }

    /// The longest `verify` waits for the listings and the probe that finding its file may need, in seconds.
    static let verifyLookupLimit = 60.0

    /// Pins the files saved as pinned (at mount): they are filled and never evicted.
    public func restorePins(_ saved: [SavedFile]) {
        for file in saved where file.pinned == true {
            guard let item = catalog.item(url: file.url) else { continue }
            let entry: CacheEntry
            do {
                entry = try fileSystem.entry(for: item)
            } catch {
                logger.error("cannot pin \(item.name) again: \(error)")
                continue
            }
            entry.setPinned(true)
            // Pinned by an earlier mount with a larger cap: kept, but not completed (its fill would not fit).
            if let refusal = entry.fillRefusal {
                logger.warning("\(item.name) is pinned but \(refusal.description)")
            }
            if !entry.isComplete { scheduler.fill(entry, url: item.metadata.url) }
        }
    }

    /// Saves the mounted set with the cache: every file in the catalog, and the saved files not mounted this run.
    /// Pinned files are open (pinning opens them, and so does `restorePins`), so saving opens nothing.
    public func saveCatalog() {
        do {
            try savedSet.save { [self] in
                // Files mounted one by one, and directory URLs (the root's with an empty name); not what listings
                // found, which the next mount lists again.
                let items = catalog.unlistedItems
                let pinned = Set(items.filter { store.openEntry(for: $0.metadata.url)?.isPinned ?? false }.map(\.inode))
                var files = items.map { item in
                    let mirrors = fileSystem.mirrors(of: item.metadata.url)
                    return SavedFile(name: catalog.path(of: item.inode), url: item.metadata.url,
                                     pinned: pinned.contains(item.inode) ? true : nil,
                                     mirrors: mirrors.isEmpty ? nil : mirrors,
                                     checksum: fileSystem.givenDigest(of: item.metadata.url)?.description,
                                     archives: fileSystem.showsArchives(of: item.metadata.url) ? true : nil)
                }
                files += catalog.directorySources.map { directory in
                    let url = directory.url ?? ""
                    return SavedFile(name: directory.name, url: url,
                                     archives: fileSystem.showsArchives(of: url) ? true : nil)
                }
                let mounted = Set(files.map(\.url))
                files += unmountedFiles.filter { !mounted.contains($0.url) }
                return files
            }
        } catch {
            logger.error("cannot save the list of mounted files: \(error)")
        }
    }
}
