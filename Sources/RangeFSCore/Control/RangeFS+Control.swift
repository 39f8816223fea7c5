// What the control channel can ask of a running mount (`rangefs status|add|rm|pause|resume|verify`).
//
// A status answer samples each file's stored bytes twice, 250 ms apart, unless an earlier status call left a
// recent sample: so even a one-shot `rangefs status` shows real speeds. Adding and removing files saves the
// mounted set with the cache, so a restart shows the same files.

import Foundation
import Glibc

extension RangeFS {
    /// Cells in a status answer's block map.
    public static let mapWidth = 50

    /// Answers one control request.
    public func handle(_ request: ControlRequest) -> ControlResponse {
        switch request.command {
        case .status: return ControlResponse(ok: true, files: status())
        case .add: return add(url: request.url, name: request.name)
        case .rm: return remove(name: request.name, keepData: request.keepData ?? false)
        case .pause, .resume: return setPaused(request.command == .pause, name: request.name, all: request.all ?? false)
        case .verify: return verify(name: request.name)
        case .pin: return pin(name: request.name)
        case .evict: return evict(name: request.name)
        case .identify: return ControlResponse(ok: true, pid: getpid())
        }
    }

    // MARK: Status

    func status() -> [FileStatus] {
        // Files of listings show once they are opened (a tree may hold thousands), named by their path.
        let shown = catalog.items.compactMap { item -> (CatalogItem, CacheEntry?)? in
            guard item.listed else { return (item, try? entry(for: item)) }
            return store.openEntry(for: item.metadata.url).map { (item, $0) }
        }
        let items = shown.map(\.0)
        let entries = shown.map(\.1)
        var first = sampleSpeeds(entries)
        if first.contains(where: { $0 == nil }) {
            usleep(250_000)
            first = sampleSpeeds(entries)
        }
        let offline = offline.withLock { $0 }
        let mounted = zip(items, zip(entries, first)).map { item, pair in
            let (entry, speed) = pair
            if !item.metadata.sizeKnown { return streamStatus(item) }
            let cached = entry?.cachedBytes ?? 0
            let bytesPerSecond = speed ?? 0
            let offlineReason = offline[item.metadata.url]
            let state = offlineReason != nil ? "offline" : stateName(entry, cached: cached, size: item.metadata.size)
            let eta: Double? = state == "downloading" && bytesPerSecond > 0
                ? Double(item.metadata.size - cached) / bytesPerSecond : nil
            return FileStatus(name: catalog.path(of: item.inode),
                              url: Redaction.redact(item.metadata.url), size: item.metadata.size,
                              cachedBytes: cached, state: state, bytesPerSecond: bytesPerSecond, etaSeconds: eta,
                              map: entry.map(Self.blockMap) ?? String(repeating: " ", count: Self.mapWidth),
                              lastError: offlineReason ?? entry?.lastError, pinned: entry?.isPinned ?? false)
        }
        // Saved files not mounted this run (their server was unreachable and nothing was cached).
        let unmounted = unmountedFiles.map {
            FileStatus(name: $0.name, url: Redaction.redact($0.url), size: 0, cachedBytes: 0, state: "unmounted",
                       bytesPerSecond: 0, etaSeconds: nil, map: String(repeating: " ", count: Self.mapWidth),
                       lastError: "not mounted: its server could not be reached at mount; kept in the saved set")
        }
        // Directories whose listing nobody has asked for yet.
        let unlisted = catalog.unlistedDirectories.map {
            FileStatus(name: ($0.inode == Catalog.rootInode ? "" : catalog.path(of: $0.inode)) + "/",
                       url: Redaction.redact($0.url ?? ""), size: 0, cachedBytes: 0, state: "not listed",
                       bytesPerSecond: 0, etaSeconds: nil, map: String(repeating: " ", count: Self.mapWidth))
        }
        return mounted + unmounted + unlisted
    }

    /// A file whose server sends no length: its size is what the stream has brought so far.
    private func streamStatus(_ item: CatalogItem) -> FileStatus {
        let download = (try? download(for: item)) ?? nil
        let cached = download?.cachedBytes ?? 0
        let state = download.map { $0.isStreaming ? "streaming" : "unsized" } ?? "error"
        return FileStatus(name: catalog.path(of: item.inode), url: Redaction.redact(item.metadata.url), size: cached,
                          cachedBytes: cached, state: state, bytesPerSecond: 0, etaSeconds: nil,
                          map: String(repeating: cached > 0 ? ":" : " ", count: Self.mapWidth),
                          lastError: download?.lastError)
    }

    private func stateName(_ entry: CacheEntry?, cached: UInt64, size: UInt64) -> String {
        guard let entry else { return "error" }
        if cached == size { return "complete" }
        if entry.isPaused { return "paused" }
        if scheduler.isTransferring(entry) { return "downloading" }
        if scheduler.isFilling(entry) { return "queued" }
        if entry.lastError != nil { return "error" }
        return "partial"
    }

    /// Speeds from the previous sample of each entry if it is between 0.2 and 5 s old, else nil (and a new sample).
    private func sampleSpeeds(_ entries: [CacheEntry?]) -> [Double?] {
        let time = Self.monotonicSeconds()
        return speedSamples.withLock { samples in
            entries.map { entry -> Double? in
                guard let entry else { return 0 }
                // Keyed by URL and generation: an entry replaced by eviction or a remote change starts afresh.
                let key = "\(entry.header.generation) \(entry.header.url)"
                let stored = entry.storedBytes
                if let (then, bytes) = samples[key], time - then >= 0.2 && time - then <= 5 {
                    samples[key] = (time, stored)
                    return max(0, Double(stored) - Double(bytes)) / (time - then)
                }
                if samples[key] == nil || time - samples[key]!.0 > 5 { samples[key] = (time, stored) }
                return nil
            }
        }
    }

    /// The block map squeezed into `mapWidth` cells: ' ' none, '.' under half, ':' most, '#' all local.
    static func blockMap(_ entry: CacheEntry) -> String {
        let present = entry.presentBlocks
        guard present.blockCount > 0 else { return String(repeating: "#", count: mapWidth) }
        return String((0..<mapWidth).map { cell -> Character in
            let lower = cell * present.blockCount / mapWidth
            let upper = max(lower + 1, (cell + 1) * present.blockCount / mapWidth)
            let range = lower..<min(upper, present.blockCount)
            let have = range.filter(present.contains).count
            if have == 0 { return " " }
            if have == range.count { return "#" }
            return have * 2 < range.count ? "." : ":"
        })
    }

    // MARK: Changing the set of files

    private func add(url given: String?, name: String?) -> ControlResponse {
        guard let given, !given.isEmpty else { return .failure("add needs a URL") }
        // The mount knows the URL without its user and password; those go to the credentials (and their file).
        let (url, newCredentials) = credentials.adopt(given)
        if newCredentials {
            do {
                try store.saveCredentials(credentials.snapshot)
            } catch {
                logger.error("cannot save the credentials for remounts: \(error)")
            }
        }
        if let name, let problem = EntryNaming.problem(withExplicitName: name) {
            return .failure("the name '\(name)' cannot name a file (\(problem)); give a plain file name")
        }
        if let existing = catalog.items.first(where: { $0.metadata.url == url }) {
            return .failure("\(Redaction.redact(url)) is already mounted as \(existing.name)")
        }
        if url.hasSuffix("/") {
            // A directory: listed on its first visit, like any other.
            if let existing = catalog.directorySources.first(where: { $0.url == url }) {
                return .failure("\(Redaction.redact(url)) is already mounted as \(existing.name)/")
            }
            let directory = catalog.addDirectory(url: url, explicitName: name)
            saveCatalog()
            return ControlResponse(ok: true, message: directory.name + "/")
        }
        switch probe([url])[0] {
        case .failure(.isDirectory(let directoryURL)):
            let directory = catalog.addDirectory(url: directoryURL, explicitName: name)
            saveCatalog()
            return ControlResponse(ok: true, message: directory.name + "/")
        case .failure(let error):
            return .failure("\(Redaction.redact(url)): \(error.userMessage)")
        case .success(let metadata):
            let item = catalog.add(metadata, explicitName: name)
            if let whole = EntryNaming.overlongName(explicit: name, metadata: metadata) {
                logger.warning("the name '\(whole.prefix(40))…' is \(whole.utf8.count) bytes, more than a file name can hold (255); it is shortened to '\(item.name.prefix(40))…'")
            }
            unmountedSaved.withLock { $0.removeAll { $0.url == url } }
            markValidated(url)
            saveCatalog()
            if prefetch == .all, let entry = try? entry(for: item) { scheduler.fill(entry, url: url) }
            if prefetch == .all, !metadata.sizeKnown { (try? download(for: item))??.fill() }
            return ControlResponse(ok: true, message: item.name)
        }
    }

    private func remove(name: String?, keepData: Bool) -> ControlResponse {
        if let name, catalog.item(named: name) == nil,
           let saved = unmountedSaved.withLock({ files -> SavedFile? in
               guard let index = files.firstIndex(where: { $0.name == name }) else { return nil }
               return files.remove(at: index)
           }) {
            saveCatalog()
            if !keepData { try? store.removeEntry(for: saved.url) }
            return ControlResponse(ok: true, message: name)
        }
        guard let name, let item = catalog.remove(named: name) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        offline.withLock { _ = $0.removeValue(forKey: item.metadata.url) }
        entryInvalidator.withLock { $0 }?(item.parent, item.name)
        if let open = try? entry(for: item) { scheduler.stopFilling(open) }
        _ = unsized.withLock { $0.removeValue(forKey: item.metadata.url) }
        saveCatalog()
        do {
            if keepData { store.forget(item.metadata.url) } else { try store.removeEntry(for: item.metadata.url) }
        } catch {
            return .failure("removed \(name), but its cached data could not be deleted: \(error)")
        }
        return ControlResponse(ok: true, message: name)
    }

    private func setPaused(_ paused: Bool, name: String?, all: Bool) -> ControlResponse {
        let items = all ? catalog.items : catalog.items.filter { $0.name == name }
        if items.isEmpty { return .failure("no file named '\(name ?? "")' in this mount; see rangefs status") }
        for item in items {
            guard let entry = try? entry(for: item) else { continue }
            entry.setPaused(paused)
            if paused {
                scheduler.stopFilling(entry)
            } else if prefetch != .none && !entry.isComplete {
                scheduler.fill(entry, url: item.metadata.url)
            }
        }
        if !paused { scheduler.wakeTransfers() }
        return ControlResponse(ok: true, message: items.map(\.name).joined(separator: ", "))
    }

    private func pin(name: String?) -> ControlResponse {
        guard let name, let item = catalog.item(named: name) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        guard let entry = try? entry(for: item) else {
            return .failure("\(name) has no known size yet (its server sends no length); read it to its end once, then pin it")
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
        if isOpen(item.inode) { return .failure("\(name) is open; close it before evicting its data") }
        if let open = try? entry(for: item) {
            if open.isPinned { return .failure("\(name) is pinned; it is never evicted") }
            scheduler.stopFilling(open)
        }
        if unsized.withLock({ $0[item.metadata.url]?.isStreaming ?? false }) {
            return .failure("\(name) is being streamed; wait for its end before evicting its data")
        }
        _ = unsized.withLock { $0.removeValue(forKey: item.metadata.url) }
        do {
            try store.removeEntry(for: item.metadata.url)
        } catch {
            return .failure("cannot delete the cached data of \(name): \(error)")
        }
        return ControlResponse(ok: true, message: name)
    }

    private func verify(name: String?) -> ControlResponse {
        guard let name, let item = catalog.item(named: name), let entry = try? entry(for: item) else {
            return .failure("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        let (checked, failed) = entry.verifyAll()
        let result = failed == 0 ? "all good" : "\(failed) failed and will be fetched again"
        return ControlResponse(ok: failed == 0, error: failed == 0 ? nil : "\(name): \(result)",
                               message: "\(name): \(checked) blocks checked, \(result)")
    }

    /// Pins the files saved as pinned (at mount): they are filled and never evicted.
    public func restorePins(_ saved: [SavedFile]) {
        for file in saved where file.pinned == true {
            guard let item = catalog.items.first(where: { $0.metadata.url == file.url }),
                  let entry = try? entry(for: item) else { continue }
            entry.setPinned(true)
            if !entry.isComplete { scheduler.fill(entry, url: item.metadata.url) }
        }
    }

    /// Saves the mounted set with the cache: every file in the catalog, and the saved files not mounted this run.
    /// Pinned files are open (pinning opens them, and so does `restorePins`), so saving opens nothing.
    public func saveCatalog() {
        catalogSaving.withLock { _ in
            do {
                // Files mounted one by one, and directory URLs (the root's with an empty name); not what listings
                // found, which the next mount lists again.
                let items = catalog.items.filter { !$0.listed }
                let pinned = Set(items.filter { store.openEntry(for: $0.metadata.url)?.isPinned ?? false }.map(\.inode))
                var files = items.map {
                    SavedFile(name: catalog.path(of: $0.inode), url: $0.metadata.url,
                              pinned: pinned.contains($0.inode) ? true : nil)
                }
                files += catalog.directorySources.map { SavedFile(name: $0.name, url: $0.url ?? "") }
                let mounted = Set(files.map(\.url))
                files += unmountedFiles.filter { !mounted.contains($0.url) }
                try store.saveFiles(files)
            } catch {
                logger.error("cannot save the list of mounted files: \(error)")
            }
        }
    }
}
