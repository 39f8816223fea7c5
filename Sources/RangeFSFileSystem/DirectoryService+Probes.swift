// The probes of DirectoryService (DirectoryService.swift): which listed files a lookup or an open probes, and what
// their answers do. A batch takes only never-probed siblings; a failed probe is remembered until the next listing
// or an open; a dead link leaves its directory. An open's probe asks for the file's first bytes (FirstBytes.swift).

import Dispatch
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension DirectoryService {
    /// Calls `waiter` once `item`'s attributes are good for `ls -l`: at once if its listing stated them, if a
    /// probe has seen it, or if its last probe failed (not again before its directory is listed again); else
    /// after a probe of it and of up to `probeBatch - 1` never-probed siblings that follow it.
    func whenAttributesKnown(_ item: CatalogItem, _ waiter: @escaping Waiter) {
        guard item.listed, !item.validated, !item.attributesExact else { return waiter() }
        enum Next { case answer, wait, probe([CatalogItem]) }
        let next = state.withLock { state -> Next in
            if state.failedProbes[item.inode] != nil { return .answer }
            if state.probing[item.inode] != nil {
                state.probing[item.inode]!.append(waiter)
                return .wait
            }
            guard let current = catalog.item(inode: item.inode), !current.validated else { return .answer }
            let following = catalog.siblings(after: current, limit: Self.probeBatch - 1, scan: Self.probeBatch * 4) {
                $0.listed && !$0.validated && !$0.attributesExact && state.probing[$0.inode] == nil
                    && state.failedProbes[$0.inode] == nil
            }
            for file in following { state.probing[file.inode] = [] }
            state.probing[current.inode] = [waiter]
            return .probe([current] + following)
        }
        switch next {
        case .answer: waiter()
        case .wait: break
        case .probe(let batch): probe(batch)
        }
    }

    /// Calls `completion` with `item` once its validators are known (at once if they are, or if it is not a
    /// listed file). A file the cache holds a version of that agrees with its listing (the same size, and the
    /// date the listing states, to its minute) takes that version's validators at once: a remount costs no
    /// request per file, and the open's background check (`--revalidate`) and the If-Range of every fetch still
    /// catch a change. Where the listing also proves that version current (an object store's ETag, or a listed
    /// date that ends before the server answered with that version: ListedDate.swift), reading the listing was
    /// the check, and the open sends no background check either. Any other file is probed now, even if its last
    /// probe failed, with a request for its first bytes that also brings its first blocks. Fails if the probe
    /// fails and nothing is cached, or with `.notFound` if it is gone.
    func whenValidated(_ item: CatalogItem,
                       _ completion: @escaping @Sendable (Result<CatalogItem, FileSystemError>) -> Void) {
        guard item.listed, !item.validated else { return completion(.success(item)) }
        let waiter: Waiter = { [self] in
            guard let current = catalog.item(inode: item.inode) else { return completion(.failure(.notFound)) }
            if current.validated { return completion(.success(current)) }
            let reason = state.withLock { $0.failedProbes[item.inode] } ?? "its server did not answer the probe"
            completion(.failure(.io(reason)))
        }
        // A probe in flight (one fetching the file ahead, DirectoryPrefetch.swift) is joined before the cache is
        // asked: its first bytes may be stored already, and the open must wait until its answer is all taken.
        let joined = state.withLock { state -> Bool in
            guard state.probing[item.inode] != nil else { return false }
            state.probing[item.inode]!.append(waiter)
            return true
        }
        if joined { return }
        // The cached version, if it agrees with the listing; taken only if the file still shows what was looked
        // at (a refresh of its directory may have stated another version since: then it is probed).
        if let stored = Self.storedVersion(agreeingWith: item, store: store) {
            // A listing that proves the cached version current is a check of it, made when that listing was read
            // from its server (a kept listing: when the mount that kept it read it; a refresh that failed moves
            // nothing). The open's background check (`--revalidate`) is then not due before the interval after
            // that. An object store's listing states each object's ETag, as the object's own answer would; a web
            // server's listing proves it by its date (ListedDate.swift).
            let proved = credentials.objectStore(for: stored.url) != nil
                ? !item.metadata.etag.isEmpty && stored.etag == item.metadata.etag
                : item.listingShowsUnchanged(stored)
            // Recorded before the file shows as validated: an open that finds it validated (the directory
            // prefetch validates the next files on a thread of its own) must not find the check unrecorded and
            // send one of its own. Should the adoption fail (a newer listing stated another version meanwhile),
            // that version is probed before anything opens it, so the record keeps no change from being seen.
            if proved, let listingReadAt = catalog.directory(inode: item.parent)?.readAt {
                events.validated(stored.url, listingReadAt)
            }
            if catalog.adoptStoredVersion(stored, inode: item.inode, expected: item.metadata) {
                return completion(.success(catalog.item(inode: item.inode) ?? item))
            }
        }
        // A probe that ended since it was looked for has validated the file (a probe marks its file validated
        // before it leaves `probing`): it is not probed twice.
        enum Next { case wait, validated(CatalogItem), probe }
        let next = state.withLock { state -> Next in
            if state.probing[item.inode] != nil {
                state.probing[item.inode]!.append(waiter)
                return .wait
            }
            if let current = catalog.item(inode: item.inode), current.validated { return .validated(current) }
            state.failedProbes[item.inode] = nil
            state.probing[item.inode] = [waiter]
            return .probe
        }
        switch next {
        case .wait: break
        case .validated(let current): completion(.success(current))
        case .probe: probeWithFirstBytes(item)
        }
    }

    /// The cached version of `item`'s URL, if it agrees with what `item`'s listing states: the same size, and
    /// the listing's date equal to its Last-Modified, or the same minute of it (nginx's HTML). Nil without an exact
    /// listing or a validator to send.
    private static func storedVersion(agreeingWith item: CatalogItem, store: CacheStore) -> RemoteMetadata? {
        // An object store's listing states each object's ETag: the cached version is the listed one if they agree.
        if item.listed, !item.metadata.etag.isEmpty, let stored = store.storedVersion(of: item.metadata.url),
           stored.sizeKnown, stored.size == item.metadata.size, stored.etag == item.metadata.etag {
            return stored
        }
        guard item.attributesExact, let listedTime = item.listedTime,
              let stored = store.storedVersion(of: item.metadata.url), stored.sizeKnown,
              stored.size == item.metadata.size, stored.ifRangeValidator != nil,
              let exact = stored.modificationTime, exact >= listedTime, exact - listedTime < 60
        else { return nil }
        return stored
    }

    /// The version of `item` to open its cache entry for, without a probe (`pin`, `--prefetch=all`): a listed
    /// file that no probe has seen holds what its listing states, with no validator and perhaps a date to the
    /// minute, which is no sign that the version its cache holds changed. Opening the entry for those attributes
    /// would drop the cached data on no answer at all (issue 35), so the cached version is opened unless the
    /// listing contradicts it (another size, or a date outside the cached one's minute, where it states both).
    /// The If-Range of every fetch, and the probe of the next open, still catch a change.
    static func versionToOpen(_ item: CatalogItem, store: CacheStore) -> RemoteMetadata {
        guard item.listed, !item.validated, let stored = store.storedVersion(of: item.metadata.url), stored.sizeKnown
        else { return item.metadata }
        guard item.attributesExact else { return stored }  // the listing states nothing to contradict it
        return storedVersion(agreeingWith: item, store: store) ?? item.metadata
    }

    /// How many bytes the probe of `file` asks for: `openProbeBytes`, or the first block of a file its listing
    /// says is larger (`FirstBytes.probeLength`).
    func probeLength(of file: CatalogItem) -> Int {
        FirstBytes.probeLength(size: file.metadata.sizeKnown ? file.metadata.size : nil, limit: settings.openProbeBytes,
                               block: settings.blockSize)
    }

    /// Probes `file`, being opened, asking for its first bytes (`probeLength`): they go to its entry before it
    /// opens, or, still streaming, become blocks in flight of it (FirstBytes.swift): the open answers at the
    /// probe's head.
    private func probeWithFirstBytes(_ file: CatalogItem, conditional: Bool = true) {
        guard settings.openProbeBytes > 0 else { return probe([file]) }
        // An object store's GET carries the listed ETag from its first request on (`If-Match`): the bytes it
        // brings are those of the version listed, or it answers 412 and the object is probed again as it is now.
        let listedETag = file.metadata.etag
        let expected = conditional && listedETag.utf8.first == UInt8(ascii: "\"") && credentials.objectStore(for: file.metadata.url) != nil
            ? listedETag : nil
        fetcher.probe(url: file.metadata.url, firstBytes: probeLength(of: file), expecting: expected) { [self] result in
            if expected != nil, case .failure(.httpStatus(412)) = result {
                logger.info("\(Redaction.redact(file.metadata.url)) changed since it was listed; probing it as it is now")
                return probeWithFirstBytes(file, conditional: false)
            }
            work.async { [self] in
                let metadata = result.map(\.metadata).map(store.settled)
                // The first bytes reach the entry before the catalog says the file is validated: an open that
                // finds it validated (one fetched ahead, DirectoryPrefetch.swift) finds its blocks there too,
                // stored or in flight on the probe's own transfer (EntryOpener+FirstBytes.swift).
                if case .success(let first) = result {
                    // Registered before the body is handed on, which may end it at once.
                    if case .streaming = first.body {
                        state.withLock { $0.streamingProbes[file.inode] = $0.streamingProbes[file.inode] ?? [] }
                        first.body.whenEnded { [self] in
                            // Off the fetcher's thread: a waiter may start the next fetch ahead.
                            let waiters = state.withLock { $0.streamingProbes.removeValue(forKey: file.inode) } ?? []
                            if !waiters.isEmpty { work.async { for waiter in waiters { waiter() } } }
                        }
                    }
                    if case .success(let settled) = metadata, settled.sizeKnown, catalog.item(inode: file.inode) != nil {
                        events.firstBytes(settled, first.body)
                    } else {
                        first.body.discard()
                    }
                }
                take(metadata, for: file)
                finishProbe(of: file)
            }
        }
    }

    /// Validates `item` as an open would (`whenValidated`: its probe brings its first bytes), and calls `done`
    /// once that probe's whole transfer is over, not only its head: a fetch ahead holds its slot until its bytes
    /// came, so that fetches ahead never run more transfers than their bound (DirectoryPrefetch.swift).
    func fetchAhead(_ item: CatalogItem, done: @escaping @Sendable () -> Void) {
        whenValidated(item) { [self] _ in
            let streaming = state.withLock { state -> Bool in
                guard state.streamingProbes[item.inode] != nil else { return false }
                state.streamingProbes[item.inode]!.append(done)
                return true
            }
            if !streaming { done() }
        }
    }

    /// The listed files whose last probe failed, with why.
    var failedProbes: [UInt64: String] {
        state.withLock { $0.failedProbes }
    }

    /// Probes `batch`, as many at once as its server keeps up with (ProbeWindows.swift).
    private func probe(_ batch: [CatalogItem]) {
        for file in batch {
            probeWindows.run(file.metadata.url) { [self] done in
                fetcher.probe(url: file.metadata.url) { [self] result in
                    done()
                    work.async { [self] in
                        take(result.map(store.settled), for: file)
                        finishProbe(of: file)
                    }
                }
            }
        }
    }

    /// Wakes what waited for the probe of `file`, whose answer is in the catalog. Thousands of probes leave their
    /// transfers' memory with the allocator: it is given back once a burst of them is over.
    private func finishProbe(of file: CatalogItem) {
        let (waiters, lastOfBurst) = state.withLock { state -> ([Waiter], Bool) in
            let waiters = state.probing.removeValue(forKey: file.inode) ?? []
            state.probesSinceTrim += 1
            guard state.probing.isEmpty, state.probesSinceTrim >= 1000 else { return (waiters, false) }
            state.probesSinceTrim = 0
            return (waiters, true)
        }
        for waiter in waiters { waiter() }
        if lastOfBurst { FileSystemCalls.releaseFreeMemory() }
    }

    /// Takes one probe's answer into the catalog.
    private func take(_ result: Result<RemoteMetadata, FetchError>, for file: CatalogItem) {
        // Redacted only for a message: most probes answer with none.
        var shown: String { Redaction.redact(file.metadata.url) }
        switch ProbeOutcome.judge(result, stored: { store.storedMetadata(for: file.metadata.url) }, wasSaved: false) {
        case .online(let metadata):
            // Marked checked before the catalog says so: an open that finds it validated must not check it again.
            events.validated(metadata.url, MonotonicClock.seconds())
            noteSizeChange(of: file, to: metadata)
            catalog.update(inode: file.inode, metadata: metadata)
        case .gone(let error):
            // A dead link: not a file. It comes back only if a new listing still lists it.
            logger.info("\(shown) answers \(error.userMessage); it leaves the directory until the next listing")
            catalog.removeNode(file.inode)
            events.removed(file.parent, file.name)
        case .offline(let stored, let reason):
            noteSizeChange(of: file, to: stored)
            catalog.update(inode: file.inode, metadata: stored)  // what its cache entry knows
            events.offline(file.metadata.url, reason)
        case .directory(let url):
            recordFailure(of: file, "it is a directory (\(Redaction.redact(url))), listed as a file", shown: shown)
        case .failed(let error, _):
            recordFailure(of: file, error.userMessage, shown: shown)
        }
    }

    /// The kernel may hold the size `file` had (its listing's) from a lookup: an open must not answer while it
    /// does (issue 45). Called before the catalog takes `metadata`, so that no open finds the one without the
    /// other.
    private func noteSizeChange(of file: CatalogItem, to metadata: RemoteMetadata) {
        if metadata.size != file.metadata.size || metadata.sizeKnown != file.metadata.sizeKnown {
            events.changed(file.inode)
        }
    }

    /// Remembers that the probe of `file` failed: lookups do not probe it again before the next listing.
    private func recordFailure(of file: CatalogItem, _ message: String, shown: String) {
        let first = state.withLock { state in
            defer { state.failedProbes[file.inode] = message }
            return state.failedProbes[file.inode] == nil
        }
        if first { logger.info("cannot probe \(shown): \(message); it is tried again when opened") }
    }
}
