// Noticing that a remote file changed, and what follows (DESIGN.md §4).
//
// A change is seen two ways: a fetch gets a 200 to its If-Range request (the scheduler reports it, after failing
// the entry's waiting readers with `.remoteChanged`), or an open finds the last check older than `revalidateAfter`
// and probes in the background. Either way the URL is probed once on the serial revalidation queue: the catalog
// takes the new metadata, the old entry goes stale, and a fresh entry serves the new version. A reader that was
// waiting queues its ESTALE answer behind that probe, so its next open already gets the new version. One change
// makes one probe: once an entry is stale, a later report of the same change finds nothing left to do.

import Dispatch
import Glibc

extension RangeFS {
    /// Re-probes the URL of `entry` in the background if its last check is older than `revalidateAfter`, so that a
    /// file read only from the cache still notices a change on the server (close-to-open, with that much lag).
    func revalidateIfDue(_ entry: CacheEntry) {
        guard let revalidateAfter = settings.revalidateAfter else { return }
        let limit = revalidateAfter.seconds
        let now = Self.monotonicSeconds()
        let due = lastValidated.withLock { checked in
            let url = entry.header.url
            if let last = checked[url], now - last < limit { return false }
            checked[url] = now
            return true
        }
        if due { revalidate(entry, knownChanged: false) }
    }

    /// Records that `url` was just checked (at mount, by the probe).
    public func markValidated(_ url: String) {
        lastValidated.withLock { $0[url] = Self.monotonicSeconds() }
    }

    /// Seconds on the monotonic clock, for ages of checks, listings and speed samples.
    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Probes `urls` at once; a file without a length whose complete copy is cached gets that copy's size.
    func probe(_ urls: [String]) -> [Result<RemoteMetadata, FetchError>] {
        scheduler.fetcher.probeAll(urls, settledIn: store)
    }

    /// Re-probes the URL of `entry` in the background; see `revalidateNow`.
    func revalidate(_ entry: CacheEntry, knownChanged: Bool) {
        revalidationQueue.async { self.revalidateNow(entry, knownChanged: knownChanged) }
    }

    /// Probes the URL of `entry` again. If the server now describes other content, the catalog takes the new
    /// metadata, the old entry goes stale and a fresh one is opened for the new version. `knownChanged` says a
    /// fetch already saw another version: then the entry goes stale even if the probe cannot reach the server.
    private func revalidateNow(_ entry: CacheEntry, knownChanged: Bool) {
        // A change already handled (or a file removed): the entry went stale once, and nothing is left to check.
        if knownChanged && entry.isStale { return }
        apply(probe([entry.header.url])[0], to: entry, knownChanged: knownChanged)
    }

    /// Acts on a fresh probe of the URL of `entry` (see `revalidateNow`). Any answer from the server ends the
    /// file's offline state; a failure to reach it keeps serving what is cached.
    func apply(_ probe: Result<RemoteMetadata, FetchError>, to entry: CacheEntry, knownChanged: Bool) {
        markValidated(entry.header.url)
        let url = entry.header.url
        guard let item = catalog.items.first(where: { $0.metadata.url == url }),
              item.metadata.describesSameContent(as: entry.header.remoteMetadata)
        else {
            entry.markStale()  // already replaced by an earlier revalidation
            return
        }
        /// Marks the entry stale; the kernel then forgets the old version's pages, so that old handles get ESTALE
        /// even where the kernel had cached pages.
        func markStale() {
            if entry.markStale() { forgetKernelPages(of: item.inode) }
        }
        if case .failure(let error) = probe, error.isOriginUnreachable {
            logger.info("cannot check \(Redaction.redact(url)) against its server: \(error.userMessage)")
            offline.withLock { if $0[url] != nil { $0[url] = error.userMessage } }
            // Unreachable: unless a fetch saw another version, keep serving what is cached.
            if knownChanged { markStale() }
            return
        }
        if offline.withLock({ $0.removeValue(forKey: url) }) != nil {
            logger.notice("\(Redaction.redact(url)) is reachable again")
        }
        switch probe {
        case .success(let fresh) where !fresh.describesSameContent(as: entry.header.remoteMetadata):
            logger.notice("\(Redaction.redact(url)) changed on the server; open handles of the old version get ESTALE")
            catalog.update(inode: item.inode, metadata: fresh)
            markStale()
            // Without a length, the new version is streamed when it is read.
            guard fresh.sizeKnown else { return scheduler.stopFilling(entry) }
            do {
                let replacement = try store.entry(for: fresh, blockSize: settings.blockSize)
                scheduler.stopFilling(entry)
                if settings.prefetch == .all { scheduler.fill(replacement, url: url) }
            } catch {
                logger.error("cannot open the cache for the new version of \(item.name): \(error)")
            }
        case .success:
            if knownChanged { markStale() }  // changed and changed back: the old bytes cannot be trusted
        case .failure(let error) where error.isGone:
            logger.warning("\(Redaction.redact(url)) is gone from the server (\(error.userMessage))")
            markStale()
        case .failure(let error):
            logger.info("cannot check \(Redaction.redact(url)) against its server: \(error.userMessage)")
            if knownChanged { markStale() }
        }
    }

    /// Answers a read ESTALE once the change its fetch found is handled: the answer waits on the revalidation
    /// queue behind the probe that the scheduler's report of the change queued, so the reader's next open finds
    /// the new version. The kernel holds the READ's pages locked until then, so they are recorded for
    /// `forgetKernelPages` to leave out.
    func answerStale(_ range: Range<UInt64>, of entry: CacheEntry, inode: UInt64, reply: @escaping Reply) {
        staleReplies.withLock { $0[inode, default: []].append(range) }
        // Queued here as well, in case this reader saw the change before any report of it: the probe runs once.
        revalidate(entry, knownChanged: true)
        revalidationQueue.async { [self] in
            reply(.failure(.stale))
            staleReplies.withLock { replies in
                if let index = replies[inode]?.firstIndex(of: range) { replies[inode]!.remove(at: index) }
                if replies[inode]?.isEmpty == true { replies[inode] = nil }
            }
        }
    }

    /// Makes the kernel drop its cached pages (and attributes) of `inode` after its entry went stale. The kernel
    /// serves cached pages without asking, so without this an old handle would go on reading them. Runs on the
    /// revalidation queue, where the ESTALE replies of the READs that found the change wait: their pages stay
    /// locked until then, so those ranges are left out here (they are not cached anyway: the READs fail), and a
    /// second, complete pass runs on its own queue for whatever was in flight meanwhile.
    private func forgetKernelPages(of inode: UInt64) {
        guard let invalidate = pageInvalidator.withLock({ $0 }) else { return }
        let page: UInt64 = 4096
        let held = staleReplies.withLock { $0[inode] ?? [] }
            .map { ($0.lowerBound / page * page)..<(($0.upperBound + page - 1) / page * page) }
            .sorted { $0.lowerBound < $1.lowerBound }
        var start: UInt64 = 0
        for range in held {
            if range.lowerBound > start { invalidate(inode, start..<range.lowerBound) }
            start = max(start, range.upperBound)
        }
        invalidate(inode, start..<UInt64.max)
        invalidationQueue.async { invalidate(inode, 0..<UInt64.max) }
    }

    static func fileSystemError(for error: FetchError) -> FileSystemError {
        switch error {
        case .remoteChanged: .stale
        default: .io(error.userMessage)
        }
    }

}
