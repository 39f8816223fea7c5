// Noticing that a remote file changed, and serving files whose server cannot be reached (DESIGN.md §4, §8).
//
// A change is seen two ways: a fetch gets a 200 to its If-Range request (the scheduler reports it, after failing
// the entry's waiting readers with `.remoteChanged`), or an open finds the last check older than `revalidateAfter`
// and probes in the background. Either way the URL is probed: the catalog takes the new metadata, the old entry
// goes stale, and a fresh entry serves the new version. A reader that was waiting gets its ESTALE answer from the
// completion of that probe, so its next open already gets the new version. One change makes one probe: once an
// entry is stale, a later report of the same change finds nothing left to do.
//
// A URL whose probe fails for a network reason (refused, unresolvable, timed out, cut off, 5xx) but that has a
// cache entry is served from the entry: its cached blocks are read, an uncached block fails with EIO after the
// usual retries. Every `offlineCheckInterval` the offline URLs are probed again, each on its own; the first answer
// from the server ends the offline state and goes through the rules above, so a file that changed meanwhile gets
// its new version. Fetches need not wait for that: each carries If-Range.
//
// Nothing here waits on the network (issue 39), as in DirectoryService: each URL has at most one probe in flight,
// which the checks asked meanwhile join, and its completion answers them (Revalidator+Checks.swift). An origin
// that accepts connections and never answers holds only its own URLs' checks, never those of another origin.

import Dispatch
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

/// Re-probes files whose content may have changed on their server, and keeps the set of files served from the
/// cache alone because their server cannot be reached. It owns that state; the kernel's page cache is reached
/// through `Events`.
/// More than 12 stored properties: the parts it is given (8: catalog, store, scheduler, settings, kernel, opener,
/// validation times, logger), its three tables (offline, stale replies, checks; each under its own lock) and its two
/// queues and timer.
public final class Revalidator: Sendable {
    /// How often offline files are probed again.
    public static let offlineCheckInterval: Duration = .seconds(5)

    private let catalog: Catalog
    let store: CacheStore
    let scheduler: FetchScheduler
    private let settings: FileSystemSettings
    /// Opens the entries of offline files to check them, as an open would (EntryOpener.swift).
    private let opener: EntryOpener
    private let logger: Logger
    /// When each URL was last checked against its server (shared with the opener: ValidationTimes.swift).
    private let validated: ValidationTimes
    /// URLs served from their cache entries alone because their server could not be reached, with the last error.
    private let offline = LockedBox<[String: String]>([:])
    /// Byte ranges of READs waiting for their ESTALE answer, by inode: the kernel holds their pages locked until the
    /// reply, so the page invalidation that runs before it must leave them out.
    private let staleReplies = LockedBox<[UInt64: [Range<UInt64>]]>([:])
    /// Where the kernel's pages are dropped after a remote change (see `forgetKernelPages`).
    private let kernel: KernelInvalidations
    /// The checks of each URL and the probes of each origin (Revalidator+Checks.swift).
    let checks = LockedBox(CheckState())
    /// Where probe answers are acted on: never the fetcher's thread, which must go on receiving, and never a FUSE
    /// thread. Concurrent: checks of different URLs never wait for each other.
    let work = DispatchQueue(label: "rangefs.revalidate", attributes: .concurrent)
    /// Where the offline timer fires; it only starts checks, so it never waits on the network.
    private let timerQueue = DispatchQueue(label: "rangefs.offline-checks")
    /// Probes the offline files now and then (`startOfflineChecks`).
    private let offlineTimer = LockedBox<RepeatingTimer?>(nil)

    init(catalog: Catalog, store: CacheStore, scheduler: FetchScheduler, settings: FileSystemSettings,
         kernel: KernelInvalidations, opener: EntryOpener, validated: ValidationTimes, logger: Logger) {
        self.kernel = kernel
        self.catalog = catalog
        self.store = store
        self.scheduler = scheduler
        self.settings = settings
        self.opener = opener
        self.validated = validated
        self.logger = logger
    }

    deinit {
        offlineTimer.withLock { $0?.timer.cancel() }
    }

    // MARK: Checks

    /// Re-probes the URL of `entry` in the background if its last check is older than `revalidateAfter`, so that a
    /// file read only from the cache still notices a change on the server (close-to-open, with that much lag).
    func revalidateIfDue(_ entry: CacheEntry) {
        guard let revalidateAfter = settings.revalidateAfter else { return }
        let due = validated.claimIfDue(entry.header.url, limit: revalidateAfter.seconds)
        if due { revalidate(entry, knownChanged: false) }
    }

    /// Whether an open of `url` now would check it against its server (`revalidateIfDue`), without recording one.
    func isDue(_ url: String) -> Bool {
        guard let revalidateAfter = settings.revalidateAfter else { return false }
        return validated.isDue(url, limit: revalidateAfter.seconds)
    }

    /// Records that `url` was checked against its server at `time` (monotonic seconds; now by default, and never
    /// later than now). A check older than one recorded already changes nothing.
    public func markValidated(_ url: String, at time: Double? = nil) {
        validated.record(url, at: time)
    }

    /// Re-probes the URL of `entry` in the background, and calls `then` once that check is done (from its
    /// completion, on no queue that waits). If the server now describes other content, the catalog takes the new
    /// metadata, the old entry goes stale and a fresh one is opened for the new version. `knownChanged` says a
    /// fetch already saw another version: then the entry goes stale even if the probe cannot reach the server.
    /// A probe of the URL in flight is joined rather than doubled (Revalidator+Checks.swift).
    func revalidate(_ entry: CacheEntry, knownChanged: Bool, then: (@Sendable () -> Void)? = nil) {
        check(entry, knownChanged: knownChanged, urgent: true, then: then)
    }

    /// Acts on a fresh probe of the URL of `entry` (see `revalidate`), then calls `done`. Any answer from the
    /// server ends the file's offline state; a failure to reach it keeps serving what is cached. A rotated ETag
    /// may take a second probe, which is waited for through its completion, never by a thread.
    func apply(_ probe: Result<RemoteMetadata, FetchError>, to entry: CacheEntry, knownChanged: Bool,
               done: @escaping @Sendable () -> Void = {}) {
        let url = entry.header.url
        markValidated(url)
        // The files that show this entry's version (two files may share a URL, and so its entry).
        let items = catalog.items(url: url).filter { $0.metadata.describesSameContent(as: entry.remoteMetadata) }
        guard !items.isEmpty else {
            entry.markStale()  // already replaced by an earlier revalidation
            return done()
        }
        if case .failure(let error) = probe, error.isOriginUnreachable {
            logger.info("cannot check \(Redaction.redact(url)) against its server: \(error.userMessage)")
            offline.withLock { if $0[url] != nil { $0[url] = error.userMessage } }
            // Unreachable: unless a fetch saw another version, keep serving what is cached.
            if knownChanged { markStale(entry, items: items) }
            return done()
        }
        if offline.withLock({ $0.removeValue(forKey: url) }) != nil {
            logger.notice("\(Redaction.redact(url)) is reachable again")
        }
        guard case .success(let fresh) = probe, entry.remoteMetadata.etagRotated(to: fresh) else {
            act(on: probe, for: entry, items: items, knownChanged: knownChanged)
            return done()
        }
        // Another ETag for the same length and date: a server that rotates them, or a file replaced within the
        // second. A second probe tells, where one answer cannot (RotatingETags.swift).
        let verdict = entry.judgeETag(fresh.etag)
        let judged: @Sendable (ETagVerdict) -> Void = { [self] verdict in
            if verdict == .rotates, let origin = entry.retireETag() { scheduler.etagsRotate(at: origin) }
            act(on: probe, for: entry, items: items, knownChanged: knownChanged)
            done()
        }
        guard verdict == .askAgain else { return judged(verdict) }
        scheduler.fetcher.probe(url: url) { [self] again in
            work.async {
                guard case .success(let again) = again.map(self.store.settled) else { return judged(verdict) }
                if again.etag == entry.remoteMetadata.etag {
                    judged(.rotates)  // its own ETag again: two nodes, two ETags
                } else if entry.remoteMetadata.etagRotated(to: again) {
                    judged(entry.judgeETag(again.etag))
                } else {
                    judged(verdict)
                }
            }
        }
    }

    /// Marks `entry` stale; the kernel then forgets the old version's pages of `items`, so that old handles get
    /// ESTALE even where the kernel had cached pages.
    private func markStale(_ entry: CacheEntry, items: [CatalogItem]) {
        if entry.markStale() { for item in items { forgetKernelPages(of: item.inode) } }
    }

    /// What a probe that reached the server (or failed for another reason than reaching it) does to `entry` and to
    /// `items`, the files that show its version (see `apply`).
    private func act(on probe: Result<RemoteMetadata, FetchError>, for entry: CacheEntry, items: [CatalogItem],
                     knownChanged: Bool) {
        let url = entry.header.url
        let markStale = { self.markStale(entry, items: items) }
        switch probe {
        case .success(let fresh) where !fresh.describesSameContent(as: entry.remoteMetadata):
            logger.notice("\(Redaction.redact(url)) changed on the server; open handles of the old version get ESTALE")
            for item in items {
                // Before the catalog changes: an open in between must not answer while the kernel holds the old
                // size (issue 45); the pages dropped by `markStale` do not cover an entry already stale.
                if fresh.size != item.metadata.size || fresh.sizeKnown != item.metadata.sizeKnown {
                    kernel.attributesChanged(of: item.inode)
                }
                catalog.update(inode: item.inode, metadata: fresh)
            }
            markStale()
            // The mirrors' validators belong to the old version: they are probed afresh against the new one.
            if let mirrorSet = scheduler.mirrors.mirrors(of: url) {
                scheduler.useMirrors(Array(mirrorSet.urls.dropFirst()), for: fresh)
            }
            // Without a length, the new version is streamed when it is read.
            guard fresh.sizeKnown else { return scheduler.stopFilling(entry) }
            do {
                let replacement = try store.entry(for: fresh, blockSize: settings.blockSize)
                scheduler.stopFilling(entry)
                if settings.prefetch == .all { scheduler.fill(replacement, url: url) }
            } catch {
                logger.error("cannot open the cache for the new version of \(items[0].name): \(error)")
            }
        case .success(let fresh):
            if knownChanged { return markStale() }  // changed and changed back: the old bytes cannot be trusted
            // The same version, answered now: the header may keep that moment (CacheEntry+Validators.swift).
            entry.noteAnswered(at: fresh.answeredAt)
        case .failure(let error) where error.isGone:
            logger.warning("\(Redaction.redact(url)) is gone from the server (\(error.userMessage))")
            markStale()
        case .failure(let error):
            logger.info("cannot check \(Redaction.redact(url)) against its server: \(error.userMessage)")
            if knownChanged { markStale() }
        }
    }

    /// Answers a read ESTALE once the change its fetch found is handled: the answer comes from the completion of
    /// the probe that the scheduler's report of the change started (joined here, or started here if this reader
    /// saw the change first), so the reader's next open finds the new version. The kernel holds the READ's pages
    /// locked until then, so they are recorded for `forgetKernelPages` to leave out.
    func answerStale(_ range: Range<UInt64>, of entry: CacheEntry, inode: UInt64,
                            reply: @escaping @Sendable () -> Void) {
        // Stale already: the catalog took the new version before the entry went stale, so nothing is left to wait
        // for. Answered now, this READ cannot hold pages that the invalidation of that change waits for.
        if entry.isStale { return reply() }
        staleReplies.withLock { $0[inode, default: []].append(range) }
        revalidate(entry, knownChanged: true) { [self] in
            reply()
            staleReplies.withLock { replies in
                if let index = replies[inode]?.firstIndex(of: range) { replies[inode]!.remove(at: index) }
                if replies[inode]?.isEmpty == true { replies[inode] = nil }
            }
        }
    }

    /// Makes the kernel drop its cached pages (and attributes) of `inode` after its entry went stale. The kernel
    /// serves cached pages without asking, so without this an old handle would go on reading them. Runs before the
    /// ESTALE replies of the READs that found the change, which wait for this check's completion: their pages stay
    /// locked until then, so those ranges are left out here (they are not cached anyway: the READs fail), and a
    /// second, complete pass runs on its own queue for whatever was in flight meanwhile.
    private func forgetKernelPages(of inode: UInt64) {
        let page: UInt64 = 4096
        let held = staleReplies.withLock { $0[inode] ?? [] }
            .map { ($0.lowerBound / page * page)..<(($0.upperBound + page - 1) / page * page) }
            .sorted { $0.lowerBound < $1.lowerBound }
        var start: UInt64 = 0
        for range in held {
            if range.lowerBound > start { kernel.forgetPagesNow(of: inode, in: start..<range.lowerBound) }
            start = max(start, range.upperBound)
        }
        kernel.forgetPagesNow(of: inode, in: start..<UInt64.max)
        kernel.forgetPages(of: inode)
    }

    // MARK: Offline files

    /// Records that `url` is served from its cache alone because its server could not be reached (`reason`).
    public func markOffline(_ url: String, reason: String) {
        offline.withLock { $0[url] = reason }
    }

    /// Why `url` is offline, or nil if its server answered.
    func offlineReason(_ url: String) -> String? {
        offline.withLock { $0[url] }
    }

    /// Every offline URL with its reason.
    var offlineFiles: [String: String] {
        offline.withLock { $0 }
    }

    /// Forgets `url`'s offline state and checks (it left the mount).
    func forget(_ url: String) {
        offline.withLock { _ = $0.removeValue(forKey: url) }
        validated.forget(url)
    }

    /// Starts probing the offline files every `interval` until `stopOfflineChecks`.
    public func startOfflineChecks(every interval: Duration = Revalidator.offlineCheckInterval) {
        let timer = DispatchSource.makeTimerSource(queue: timerQueue)
        timer.schedule(deadline: .now() + interval.dispatchInterval, repeating: interval.dispatchInterval)
        timer.setEventHandler { [weak self] in self?.checkOfflineFiles() }
        timer.resume()
        let handle = RepeatingTimer(timer)
        offlineTimer.withLock { $0?.timer.cancel(); $0 = handle }
    }

    public func stopOfflineChecks() {
        offlineTimer.withLock { $0?.timer.cancel(); $0 = nil }
    }

    /// Starts a check of every offline file, each on its own: one lookup per URL, so 10,000 offline files cost
    /// 10,000 lookups, not 10,000 walks of the catalog. A URL whose probe is still in flight (a server that never
    /// answers) is joined, not probed again, and holds no other URL's check. Each check enters `group` and leaves
    /// it once it is done.
    func checkOfflineFiles(group: DispatchGroup? = nil) {
        let urls = offline.withLock { Array($0.keys) }
        // A file without a known length has no block entry to check (its stream notices a change itself).
        let entries = urls.compactMap(catalog.item(url:)).filter(\.metadata.sizeKnown).compactMap { item -> CacheEntry? in
            do {
                return try opener.entry(for: item)
            } catch {
                logger.error("cannot open the cache for \(item.name) to check it against its server: \(error)")
                return nil
            }
        }
        for entry in entries {
            group?.enter()
            check(entry, knownChanged: false, urgent: false) { group?.leave() }
        }
    }
}

/// A dispatch timer, to keep in a lock.
final class RepeatingTimer: @unchecked Sendable {
    // @unchecked Sendable: dispatch sources may be cancelled from any thread, and `timer` never changes.
    let timer: DispatchSourceTimer
    init(_ timer: DispatchSourceTimer) { self.timer = timer }
}
