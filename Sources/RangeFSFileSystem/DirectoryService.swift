// Web directories as trees (DESIGN.md §7), listed and probed without holding a lock or a FUSE thread.
//
// The directory URLs a mount is given are listed at mount (`listNow`), so that one that cannot be listed is
// reported there; their subdirectories on their first lookup or readdir. The mount waits for a listing's first
// page only (an object store's first 1,000 keys, a web listing's first 64 KiB): readers of the directory wait for
// the rest, not the mount. A listing is one GET that asks for JSON
// first. A directory whose listing failed, with no earlier listing to show, fails lookups and reads with EIO
// (retried after `listingRetryAfter`), and shows in `status` as an error. Its
// subdirectories become directories of the mount (listed in turn when first visited), its files listed files. A
// listed file whose listing states its size exactly and its date (nginx JSON and Caddy to the second, nginx HTML
// to the minute) costs no request until it is opened; any other one is probed on its first lookup, with up to
// `probeBatch - 1` of the never-probed siblings that follow it, since `ls -l` looks them up one after another.
// `readdir` alone never probes. Opening a listed file that no probe has seen probes it first, for its validators.
//
// Nothing here waits. A lookup, readdir or open that needs the network registers a waiter and returns; the
// listing or probe runs on the fetcher, and its completion (on `work`) updates the catalog and wakes every waiter
// of that directory or file. Concurrent waiters share one listing or probe in flight, and a directory or probe
// that stalls delays nothing else: the state lock is held only for bookkeeping.
//
// Probes are remembered. A link that answers 404 or 410 is not a file: it leaves the directory, with one log
// line, until the directory is listed again. Any other failure keeps the file with its error (shown in `status`)
// and is not probed again by lookups until the next listing of its directory; opening it probes it again.
//
// Each listing read is kept in the cache (`listings/`), so that while the server cannot be reached the tree shows
// as it was last seen, and files read before are served from their cache entries.
//
// Locks: `state` is taken before `Catalog.state` (the batch's siblings are chosen under both); nothing else is
// taken under it, and no waiter runs under it.

import Dispatch
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

/// What became of a directory's listing.
public enum ListingOutcome: Equatable, Sendable {
    /// Its server listed it.
    case listed
    /// Its server could not be reached (why), and the listing kept from an earlier visit shows instead.
    case kept(String)
    /// It could not be listed (why); it shows nothing, or what an earlier listing of this run showed. `gone`: its
    /// server says it does not exist (404, 410).
    case failed(String, gone: Bool)
}

/// Lists directory URLs and probes their files for `RangeFS`, sharing each listing and probe in flight.
final class DirectoryService: Sendable {
    /// What the service tells its owner.
    struct Events: Sendable {
        /// A listed file is served from its cache entry alone: its server could not be reached (the reason).
        var offline: @Sendable (_ url: String, _ reason: String) -> Void = { _, _ in }
        /// `url` was checked against its server at `time` (monotonic seconds): a probe saw it, or an object
        /// store's listing read then stated the ETag of its cached version.
        var validated: @Sendable (_ url: String, _ time: Double) -> Void = { _, _ in }
        /// `name` left directory `parent` (gone from its listing, or a dead link): the kernel must forget it.
        var removed: @Sendable (_ parent: UInt64, _ name: String) -> Void = { _, _ in }
        /// A newer listing states another size or date for `inode`, or a probe (online, or the cache's answer
        /// for a server out of reach) found another size than it had: the kernel must drop its attributes, before
        /// the next open of it answers.
        var changed: @Sendable (_ inode: UInt64) -> Void = { _ in }
        /// The probe of a file being opened brought its first bytes (from offset 0), or they are on their way:
        /// they belong in its entry, which this must open before it returns (the open then waits for them there).
        var firstBytes: @Sendable (_ metadata: RemoteMetadata, _ body: FirstBytes.Body) -> Void = { $1.discard() }
    }

    typealias Waiter = @Sendable () -> Void

    /// The largest listing read, in bytes: a million entries of nginx's JSON.
    static let listingLimit = 128 << 20
    /// The largest object-store listing, in bytes of the JSON its pages become (ObjectListing.swift): a million
    /// objects (1,000 pages) whose records, with their ETags, run past `listingLimit` (122 MB for short names).
    static let objectListingLimit = CacheStore.keptListingLimit
    /// Files probed at once when a lookup needs a probe.
    static let probeBatch = 32
    /// How long a failed listing is not tried again, in seconds.
    static let listingRetryAfter = 10.0
    /// The deepest a listed tree goes: subdirectories below this depth are left out, with a log line (a server
    /// whose links make an endless tree, `a/a/a/...`, stops here).
    static let maximumDepth = 64

    struct Listing {
        var waiters: [Waiter] = []
        var running = false
        /// When the last listing failed (monotonic seconds), and why.
        var failedAt: Double?
        var failure: String?
        /// What waits for the outcome itself (the mount, `rangefs add`).
        var reports: [@Sendable (ListingOutcome) -> Void] = []
        /// Set while it runs as a listing ahead (DirectoryService+WalkAhead.swift): which walk, how deep it goes on.
        var ahead: WalkStep?
        /// Whether it is already a second try for the readers waiting (after a listing ahead or a busy server failed).
        var again = false
    }

    struct State {
        var listings: [UInt64: Listing] = [:]
        /// Files being probed, and what waits for each.
        var probing: [UInt64: [Waiter]] = [:]
        /// Files whose open's probe answered at its head and still streams its first bytes, and what waits for
        /// the end of that transfer (`fetchAhead`).
        var streamingProbes: [UInt64: [Waiter]] = [:]
        /// Files whose last probe failed (not with 404 or 410), with why.
        var failedProbes: [UInt64: String] = [:]
        /// Directories whose listing held more entries than `DirectoryListing.maximumEntries`.
        var truncated: Set<UInt64> = []
        /// Probes answered since memory was last given back to the system.
        var probesSinceTrim = 0
        /// Directories whose names with control characters have been logged: once a mount, not at every refresh.
        var reportedControlNames: Set<UInt64> = []
        /// The listings ahead queued and running (DirectoryService+WalkAhead.swift).
        var walkAhead = WalkAhead()
    }

    let state = LockedBox(State())
    /// How many probes of listed files run at once per server (ProbeWindows.swift).
    let probeWindows = ProbeWindows()
    /// Taken while a kept listing is applied at a first visit (`showSavedListing`).
    private let savedListingShown = LockedBox(())
    let catalog: Catalog
    let store: CacheStore
    let fetcher: RangeFetching
    /// Which origins are object stores (listed with ListObjectsV2, ObjectListing.swift), and how to reach them.
    let credentials: CredentialTable
    /// The settings it follows: `directoryCacheTime`, `listingTimeout` (ListingDeadline.swift), `openProbeBytes` and,
    /// for a file larger, `blockSize` (FirstBytes.swift), `walkAheadListings` (DirectoryService+WalkAhead.swift).
    let settings: FileSystemSettings
    let events: Events
    let logger: Logger
    /// Where completions parse listings and update the catalog: never the fetcher's thread, which must go on
    /// receiving, and never a FUSE thread.
    let work = DispatchQueue(label: "rangefs.directories", attributes: .concurrent)

    init(catalog: Catalog, store: CacheStore, fetcher: RangeFetching, credentials: CredentialTable = CredentialTable(),
         settings: FileSystemSettings, events: Events, logger: Logger) {
        self.catalog = catalog
        self.store = store
        self.fetcher = fetcher
        self.credentials = credentials
        self.settings = settings
        self.events = events
        self.logger = logger
    }

    // MARK: Listings

    /// Calls `waiter` once directory `inode` has been listed (at once if it was, or if it has no URL, or if its
    /// last listing failed less than `listingRetryAfter` ago: it then shows what it holds). A directory listed
    /// longer than `directoryCacheTime` ago is listed again in the background and shows what it holds meanwhile.
    func whenListed(_ inode: UInt64, _ waiter: @escaping Waiter) {
        guard let directory = catalog.directory(inode: inode), let url = directory.url else { return waiter() }
        if !directory.listed { _ = showSavedListing(inode, url: url) }
        enum Next { case answer, refresh, wait, start }
        let now = MonotonicClock.seconds()
        // Decided from the catalog as it is under the state lock, not as it was before: a listing marks its
        // directory listed before it leaves `listings`, so here it is running or listed, never neither. A reader
        // that looked before and locked after would list the directory a second time.
        let next = state.withLock { state -> Next in
            if let current = catalog.directory(inode: inode), current.listed {
                guard let listedAt = current.listedAt, now - listedAt > settings.directoryCacheTime.seconds,
                      state.listings[inode]?.running != true else { return .answer }
                state.listings[inode, default: Listing()].running = true
                return .refresh
            }
            var listing = state.listings[inode, default: Listing()]
            defer { state.listings[inode] = listing }
            if !listing.running, let failedAt = listing.failedAt, now - failedAt < Self.listingRetryAfter {
                return .answer
            }
            listing.waiters.append(waiter)
            if listing.running { return .wait }  // a listing ahead too: the reader joins it
            listing.running = true
            leaveWalkQueue(inode, in: &state)  // a reader never waits behind listings ahead
            return .start
        }
        switch next {
        case .answer: waiter()
        case .refresh:
            list(inode, url: url)
            waiter()
        case .wait: break
        case .start: list(inode, url: url)
        }
    }

    /// The directories whose listing held more entries than the cap.
    var truncatedDirectories: [UInt64] {
        state.withLock { $0.truncated.sorted() }
    }

    func list(_ inode: UInt64, url: String) {
        // A first listing of an object store's directory whose kept listing is still fresh costs no request.
        if catalog.directory(inode: inode)?.listed == false, showSavedListing(inode, url: url),
           let listedAt = catalog.directory(inode: inode)?.listedAt,
           MonotonicClock.seconds() - listedAt <= settings.directoryCacheTime.seconds {
            return work.async { [self] in finish(inode, outcome: .listed, failure: nil) }
        }
        // What the listing states was true when it was asked for (an object store's 100 pages take a while).
        let askedAt = MonotonicClock.seconds()
        let completion: @Sendable (Result<[UInt8], FetchError>) -> Void = { [self] result in
            // Handed on in a box that is emptied when it is read: the listing's body then has one owner, and a JSON
            // listing's 19 MB are let go once read to records, before the catalog grows (ListingJSON+Records.swift).
            let handed = LockedBox<Result<[UInt8], FetchError>?>(result)
            work.async { [self] in
                guard var result = handed.withLock({ $0.take() }) else { return }
                // A reader must not fail for the walk ahead's sake: it lists again (DirectoryService+WalkAhead.swift).
                if listAgainForReaders(inode, url: url, after: result) { return }
                // Someone shows the outcome to the user (the mount, `rangefs add`): the log need not say it too,
                // where it would reach the same terminal twice. Nor need it for a listing ahead nobody waits for.
                let reported = state.withLock { state in
                    guard let listing = state.listings[inode] else { return false }
                    return !listing.reports.isEmpty || (listing.ahead != nil && listing.waiters.isEmpty)
                }
                let outcome = read(&result, into: inode, from: url, askedAt: askedAt, reported: reported)
                let failure: FetchError? = if case .failure(let error) = result { error } else { nil }
                finish(inode, outcome: outcome, failure: failure)
            }
        }
        // Called before the completion, from the thread that then calls it: run at once (a lock held for
        // bookkeeping, and reports that only record and signal), so that it cannot overtake the listing's end.
        let firstPage: @Sendable () -> Void = { [self] in firstPageRead(inode) }
        let timeout = settings.listingTimeout.seconds
        if let access = credentials.objectStore(for: url) {
            fetcher.fetchObjectListing(url, access: access, limit: Self.objectListingLimit, timeout: timeout,
                                       firstPage: firstPage, completion: completion)
        } else {
            fetcher.fetchListing(url, limit: Self.listingLimit, timeout: timeout, firstPage: firstPage,
                                 completion: completion)
        }
    }

    /// The first page of directory `inode`'s listing was read and more is on its way: what waits for the outcome
    /// (the mount, `rangefs add`) hears now that it is listed, and goes on; readers of the directory go on waiting
    /// for the whole (issue 46: a million objects are 1,000 pages, and the mount waited for all of them). Should
    /// the rest fail, the directory fails as one whose listing failed after the mount, with a log line.
    private func firstPageRead(_ inode: UInt64) {
        let reports = state.withLock { state -> [@Sendable (ListingOutcome) -> Void] in
            guard let listing = state.listings[inode], listing.running else { return [] }
            let reports = listing.reports
            state.listings[inode]?.reports = []
            return reports
        }
        for report in reports { report(.listed) }
    }

    /// Ends the listing of directory `inode`: answers its waiters and reports, and goes on with the walk ahead.
    private func finish(_ inode: UInt64, outcome: ListingOutcome, failure: FetchError?) {
        let (waiters, reports, step, quiet) = state.withLock { state in
            let listing = state.listings.removeValue(forKey: inode) ?? Listing()
            // Its walk stays alive until `listingEnded` goes on below it: another walk's listing ending in between
            // forgot the walk's budget, and this one's subdirectories were not listed ahead.
            if let step = listing.ahead { state.walkAhead.ending[step.walk, default: 0] += 1 }
            // A listing ahead that failed with no reader waiting leaves no error: a reader lists again.
            let quiet = listing.ahead != nil && listing.waiters.isEmpty && listing.reports.isEmpty
            if case .failed(let why, _) = outcome, !quiet {
                state.listings[inode] = Listing(failedAt: MonotonicClock.seconds(), failure: why)
            }
            return (listing.waiters, listing.reports, listing.ahead, quiet)
        }
        for waiter in waiters { waiter() }
        for report in reports { report(outcome) }
        listingEnded(inode, step: step, quiet: quiet, outcome: outcome, failure: failure)
    }

    /// Lists directory `inode` now (or joins the listing in flight) and reports how that went: at mount and for
    /// `rangefs add`, where a directory that cannot be listed is an error the user must see.
    func listNow(_ inode: UInt64, report: @escaping @Sendable (ListingOutcome) -> Void) {
        guard let directory = catalog.directory(inode: inode), let url = directory.url else { return report(.listed) }
        // An object store's tree remounted: the kept listing shows it, and a visit refreshes it when it is old.
        if !directory.listed, showSavedListing(inode, url: url) { return report(.listed) }
        let start = state.withLock { state -> Bool in
            var listing = state.listings[inode, default: Listing()]
            defer { state.listings[inode] = listing }
            listing.reports.append(report)
            if listing.running { return false }
            listing.running = true
            leaveWalkQueue(inode, in: &state)
            return true
        }
        if start { list(inode, url: url) }
    }

    /// Why directory `inode` shows nothing: its listing failed and no listing of it was ever read. Nil otherwise.
    func listingFailure(of inode: UInt64) -> String? {
        guard let directory = catalog.directory(inode: inode), directory.url != nil, !directory.listed else { return nil }
        return state.withLock { $0.listings[inode]?.failure }
    }

    /// The directories that cannot be listed and show nothing, with why.
    var failedListings: [UInt64: String] {
        let failed = state.withLock { state in
            state.listings.compactMapValues { $0.running ? nil : $0.failure }
        }
        return failed.filter { inode, _ in catalog.directory(inode: inode).map { !$0.listed } ?? false }
    }

    /// Shows an object store's directory from the listing kept at its last visit, with no request (LIST requests
    /// cost money, and a bucket's tree can be 100 pages): as listed when that listing was read, so that
    /// `directoryCacheTime` lists it again in the background as it would have in the mount that read it. Web
    /// directories are listed at once instead (DESIGN.md §7). Returns whether the directory is listed now.
    func showSavedListing(_ inode: UInt64, url: String) -> Bool {
        guard credentials.objectStore(for: url) != nil else { return false }
        return savedListingShown.withLock { _ -> Bool in
            // Under this lock only (never held across the network): two first visits apply the kept listing once.
            guard let directory = catalog.directory(inode: inode) else { return false }
            if directory.listed { return true }
            guard let age = store.savedListingAge(for: url), let kept = store.savedListing(for: url) else { return false }
            if !addWhole(kept, to: inode, listedFrom: url) {
                let listing = DirectoryListing.parse(kept, base: url)
                guard DirectoryListing.problem(with: kept, parsed: listing) == nil else { return false }
                apply(listing, to: inode, listedFrom: url)
            }
            let readAt = MonotonicClock.seconds() - age
            catalog.markListed(inode, at: readAt, readAt: readAt)
            return true
        }
    }
}
