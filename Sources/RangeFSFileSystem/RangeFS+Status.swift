// The `status` verb (`rangefs status`): each file's size, cached share, state, speed, ETA and block map, and the totals.
//
// A mount may hold 10,000 files, and status must answer within a second or two without opening their entries: a
// file whose entry is not open is described from what its cache files say (CacheStore+Idle.swift), and its map is
// read from its bitmap only when it is shown. By default the answer holds the totals and the files worth a look
// (not complete, not untouched); `all` asks for every file. Speeds are each open entry's rate over the last few
// seconds (TransferRate), so a one-shot `rangefs status` shows the pace of a copy, not of a burst.
import RangeFSCache
import RangeFSCatalog
import RangeFSSystem


extension RangeFS {
    /// Cells in a status answer's block map.
    package static let mapWidth = 50

    /// The states a default status leaves out: nothing to see there.
    package static let quietStates: Set<String> = ["complete", "empty"]

    package func status(all: Bool = false) -> MountStatus {
        // Every file, listed ones included: the totals count what is cached of each, opened or not, read from
        // the entries' summaries (no entry is opened, no request sent). A tree may hold 100,000 files, so a file's
        // path and map are made only when it is shown.
        let failedProbes = directories.failedProbes
        let items = catalog.items
        let entries = items.map { store.openEntry(for: $0.metadata.url) }
        // A file whose entry is not open is not downloading.
        let speeds = entries.map { $0?.recentRate ?? 0 }
        let offline = revalidator.offlineFiles
        var files: [FileStatus] = []
        var totals = StatusTotals()
        for ((listed, entry), speed) in zip(zip(items, entries), speeds) {
            let item = itemShown(listed)
            var status: FileStatus
            if item.metadata.sizeKnown {
                status = fileStatus(item, entry: entry, speed: speed, offline: offline[item.metadata.url],
                                    probeFailure: failedProbes[item.inode])
            } else if item.listed {
                // A listed file found to have no length: no stream is made just to describe it.
                status = FileStatus(name: "", url: "", size: 0, cachedBytes: 0, state: "unsized", bytesPerSecond: 0,
                                    etaSeconds: nil, map: Self.blankMap)
            } else {
                status = streamStatus(item)
            }
            totals.count(status)
            // `all` lists every file, but not the untouched files of listings: a tree of 100,000 would make an
            // answer of tens of megabytes that says nothing the totals do not.
            let untouchedListed = item.listed && entry == nil && status.state == "empty"
            guard all ? !untouchedListed : !Self.quietStates.contains(status.state) else { continue }
            status.name = catalog.path(of: item.inode)
            status.url = Redaction.redact(item.metadata.url)
            (status.passthroughHandles, status.daemonReads) = handleUsage(of: item.inode)
            status.mirrors = mirrorStatus(of: item.metadata.url)
            if let archive = archiveReport(of: item) { status.note = status.note ?? "archive " + archive }
            // The map of a file whose entry is not open comes from its bitmap on disk, read only when shown.
            if entry == nil, item.metadata.sizeKnown,
               let present = store.storedPresentBlocks(of: item.metadata, matchingSizeOnly: !item.validated) {
                status.map = Self.blockMap(present)
            }
            files.append(status)
        }
        // Saved files not mounted this run (their server was unreachable and nothing was cached).
        for saved in mountedSet.unmounted {
            let status = FileStatus(name: saved.name, url: Redaction.redact(saved.url), size: 0, cachedBytes: 0,
                                    state: "unmounted", bytesPerSecond: 0, etaSeconds: nil, map: Self.blankMap,
                                    lastError: "not mounted: its server could not be reached at mount; kept in the saved set")
            totals.count(status)
            files.append(status)
        }
        // Directories whose listing nobody has asked for yet, those that cannot be listed, and those listed in part.
        let failedListings = failedListings
        for directory in catalog.unlistedDirectories {
            let failure = failedListings[directory.inode]
            let status = FileStatus(name: directoryName(directory.inode), url: Redaction.redact(directory.url ?? ""),
                                    size: 0, cachedBytes: 0, state: failure == nil ? "not listed" : "error",
                                    bytesPerSecond: 0, etaSeconds: nil, map: Self.blankMap,
                                    lastError: failure.map { "cannot be listed: \($0)" })
            files.append(status)
        }
        for inode in directories.truncatedDirectories {
            guard let directory = catalog.directory(inode: inode) else { continue }
            let status = FileStatus(name: directoryName(inode), url: Redaction.redact(directory.url ?? ""), size: 0,
                                    cachedBytes: 0, state: "listed in part", bytesPerSecond: 0, etaSeconds: nil,
                                    map: Self.blankMap,
                                    lastError: "its listing holds more than \(DirectoryListing.maximumEntries) entries; the rest are left out")
            files.append(status)
        }
        // In path order, so that a tree reads as one (and `status` of the same mount reads the same each time).
        files.sort { $0.name < $1.name }
        // Describing a large tree takes memory for a moment: give it back rather than keep it as the daemon's size.
        if items.count > 10_000 { FileSystemCalls.releaseFreeMemory() }
        // A cache disk that fails writes or commits (full, say) is said in every status until it works again.
        return MountStatus(files: files, totals: totals, passthrough: passthroughMode.withLock { $0 }.description,
                           proxy: proxyReport?(), cacheProblems: store.cacheProblems)
    }

    /// The status of each file whose cache entry is open, without totals: a file whose entry is not open changes only
    /// when it opens (or its server's answer does, which the next full status shows), so a caller that asks every
    /// second (`rangefs ui`) pays for the few files in use, not for all 10,000 (a full status of them costs the
    /// daemon some 50 ms).
    package func activeStatus() -> MountStatus {
        let open = store.entries.withLock { Array($0.values) }
        let offline = revalidator.offlineFiles
        var files: [FileStatus] = []
        for entry in open where !entry.isStale {
            for item in catalog.items(url: entry.header.url) where item.metadata.sizeKnown {
                var status = fileStatus(item, entry: entry, speed: entry.recentRate,
                                        offline: offline[item.metadata.url], probeFailure: nil)
                status.name = catalog.path(of: item.inode)
                status.url = Redaction.redact(item.metadata.url)
                status.mirrors = mirrorStatus(of: item.metadata.url)
                files.append(status)
            }
        }
        files.sort { $0.name < $1.name }
        return MountStatus(files: files)
    }

    /// One string shared by every blank map (a status of 100,000 files would otherwise allocate one per file).
    private static let blankMap = String(repeating: " ", count: mapWidth)

    private func directoryName(_ inode: UInt64) -> String {
        (inode == Catalog.rootInode ? "" : catalog.path(of: inode)) + "/"
    }

    /// The status of a file of known size; its map from its open entry (blank without one).
    private func fileStatus(_ item: CatalogItem, entry: CacheEntry?, speed: Double, offline: String?,
                            probeFailure: String?) -> FileStatus {
        let cached = entry?.cachedBytes ?? store.cachedBytes(of: item.metadata, matchingSizeOnly: !item.validated)
        let size = item.metadata.size
        // Under a cache cap: why the file is not completed (issue 45), said instead of an ETA that never comes.
        let refusal = cached == size ? nil : entry?.fillRefusal
        let state: String
        if offline != nil {
            state = "offline"
        } else if let entry {
            state = stateName(entry, cached: cached, size: size, refusal: refusal)
        } else if probeFailure != nil {
            state = "error"
        } else {
            state = cached == size ? "complete" : cached == 0 ? "empty" : "partial"
        }
        let eta: Double? = state == "downloading" && speed > 0 ? Double(size - cached) / speed : nil
        let map = entry.map { Self.blockMap($0.presentBlocks) } ?? Self.blankMap
        var status = FileStatus(name: "", url: "", size: size, cachedBytes: cached, state: state, bytesPerSecond: speed,
                                etaSeconds: eta, map: map, lastError: offline ?? probeFailure ?? entry?.lastError,
                                pinned: entry?.isPinned ?? false)
        status.note = refusal?.description
        // The end-to-end check: of a complete file, or one being fetched again after a mismatch.
        let digest = digestState(of: item)
        if cached == size || digest.detail != nil {
            status.digest = digest.detail ?? digest.short
            if digest.failed {
                status.state = "error"
                status.lastError = digest.detail
            }
        }
        return status
    }

    /// A file whose server sends no length: its size is what its stream has brought so far (whole blocks of its
    /// entry of unknown size), its state "streaming" while its stream runs, else "unsized".
    private func streamStatus(_ item: CatalogItem) -> FileStatus {
        let open = store.openEntry(for: item.metadata.url).flatMap { $0.isStale ? nil : $0 }
        let cached = open?.cachedBytes ?? store.cachedBytes(of: item.metadata)
        let state = isStreaming(item.metadata.url) ? "streaming" : "unsized"
        return FileStatus(name: catalog.path(of: item.inode), url: Redaction.redact(item.metadata.url), size: cached,
                          cachedBytes: cached, state: state, bytesPerSecond: open?.recentRate ?? 0, etaSeconds: nil,
                          map: String(repeating: cached > 0 ? ":" : " ", count: Self.mapWidth),
                          lastError: open?.lastError)
    }

    private func stateName(_ entry: CacheEntry, cached: UInt64, size: UInt64, refusal: FillRefusal?) -> String {
        if cached == size { return "complete" }
        if case .largerThanCache = refusal { return "read through" }
        if entry.isPaused { return "paused" }
        if scheduler.isTransferring(entry) { return "downloading" }
        if scheduler.isFilling(entry) { return "queued" }
        if entry.lastError != nil { return "error" }
        return cached == 0 ? "empty" : "partial"
    }

    /// The block map squeezed into `mapWidth` cells: ' ' none, '.' under half, ':' most, '#' all local.
    static func blockMap(_ present: BlockBitmap) -> String {
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
}
