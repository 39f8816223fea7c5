// The user's verbs on a running mount (issue 48): `rm`, `pause`, `resume`, `pin`, `evict`, `verify` and
// `blockmap` here, `add` in RangeFS+Adding.swift, `status` in RangeFS+Status.swift. Each does the whole operation
// in the core, every step of it (the revalidator's, the kernel's, the scheduler's, the store's), and answers a
// VerbOutcome; the control service only turns requests into these calls and their outcomes into replies, and
// reaches none of the parts.

import Dispatch
import RangeFSCache
import RangeFSCatalog
import RangeFSSystem

extension RangeFS {
    /// Removes the file `name` from the mount (or a saved file not mounted this run from the saved set); with
    /// `keepData` its cached data stays (a later add of its URL finds it), else it is deleted.
    package func remove(name: String?, keepData: Bool = false) -> VerbOutcome {
        if let name, catalog.item(named: name) == nil, let saved = mountedSet.takeUnmounted(named: name) {
            stopShowingArchives(of: saved.url)
            saveMountedSet()
            forgetQuery(of: saved.url)
            if !keepData {
                do {
                    try store.removeEntry(for: saved.url)
                } catch {
                    return .failed("removed \(name), but its cached data could not be deleted: \(error)")
                }
            }
            return .done(name)
        }
        guard let name, let item = catalog.remove(named: name) else {
            return .failed("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        revalidator.forget(item.metadata.url)
        stopShowingArchives(of: item.metadata.url)
        // Through the one queue, and sent before the answer: a name looked up after `rangefs rm` returns is gone.
        kernel.forgetName(item.name, in: item.parent)
        kernel.flush()
        if let open = store.openEntry(for: item.metadata.url) { scheduler.stopFilling(open) }
        saveMountedSet()
        forgetQuery(of: item.metadata.url)
        do {
            if keepData { store.forget(item.metadata.url) } else { try store.removeEntry(for: item.metadata.url) }
        } catch {
            return .failed("removed \(name), but its cached data could not be deleted: \(error)")
        }
        return .done(name)
    }

    /// Pauses the download of the file `name`, or with `all` of every file that has something to download.
    package func pause(name: String?, all: Bool = false) -> VerbOutcome {
        setPaused(true, name: name, all: all)
    }

    /// Resumes the download of the file `name`, or with `all` of every file that has something to download.
    package func resume(name: String?, all: Bool = false) -> VerbOutcome {
        setPaused(false, name: name, all: all)
    }

    /// Pauses or resumes one file by name, or with `all` every file that has something to download: those whose
    /// entry is open (a file nobody opened downloads nothing; pausing all of 10,000 files opens none of them).
    private func setPaused(_ paused: Bool, name: String?, all: Bool = false) -> VerbOutcome {
        let items: [CatalogItem]
        if all {
            items = catalog.items.filter { $0.metadata.sizeKnown && store.openEntry(for: $0.metadata.url) != nil }
        } else {
            guard let name, let item = catalog.item(named: name) else {
                return .failed("no file named '\(name ?? "")' in this mount; see rangefs status")
            }
            guard item.metadata.sizeKnown else {
                return .failed("\(name) has no known size yet (its server sends no length); it downloads only while read")
            }
            items = [item]
        }
        var failures: [String] = []
        for item in items {
            let entry: CacheEntry
            do {
                entry = try self.entry(for: item)
            } catch {
                failures.append("\(item.name): \(error)")
                continue
            }
            entry.setPaused(paused)
            if paused {
                scheduler.stopFilling(entry)
            } else if prefetch != .none && !entry.isComplete {
                scheduler.fill(entry, url: item.metadata.url)
            }
        }
        if !paused { scheduler.wakeTransfers() }
        guard failures.isEmpty else {
            return .failed("cannot \(paused ? "pause" : "resume") \(failures.joined(separator: "; "))")
        }
        return .done(all && items.isEmpty ? "nothing is downloading" : items.map(\.name).joined(separator: ", "))
    }

    /// Pins the file `name`: it is filled whole and never evicted, and stays pinned across remounts.
    package func pin(name: String?) -> VerbOutcome {
        guard let name, let item = catalog.item(named: name) else {
            return .failed("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        guard item.metadata.sizeKnown else {
            return .failed("\(name) has no known size yet (its server sends no length); read it to its end once, then pin it")
        }
        let entry: CacheEntry
        do {
            entry = try self.entry(for: item)
        } catch {
            return .failed("cannot pin \(name): \(error)")
        }
        // A pinned file is kept whole and never evicted: one larger than the cap cannot be (issue 45).
        if !entry.isPinned, let refusal = store.ledger.refusalToFill(entry) {
            return .failed("cannot pin \(name): its \(CacheCloseReport.bytes(entry.size)) do not fit under \(refusal.room); "
                           + "raise --cache-max-size, or pin a smaller file")
        }
        entry.setPinned(true)
        entry.setPaused(false)
        if !entry.isComplete { scheduler.fill(entry, url: item.metadata.url) }
        saveMountedSet()
        return .done(name)
    }

    /// Deletes the cached data of the file `name`, which stays mounted: unless it is open, pinned or streamed.
    package func evict(name: String?) -> VerbOutcome {
        guard let name, let item = catalog.item(named: name) else {
            return .failed("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        if isOpen(item.inode) { return .failed("\(name) is open; close it before evicting its data") }
        if let open = store.openEntry(for: item.metadata.url) {
            if open.isPinned { return .failed("\(name) is pinned; it is never evicted") }
            scheduler.stopFilling(open)
        }
        if isStreaming(item.metadata.url) {
            return .failed("\(name) is being streamed; wait for its end before evicting its data")
        }
        do {
            try store.removeEntry(for: item.metadata.url)
        } catch {
            return .failed("cannot delete the cached data of \(name): \(error)")
        }
        return .done(name)
    }

    /// The longest `verify` waits for the listings and the probe that finding its file may need, in seconds.
    static let verifyLookupLimit = 60.0

    /// Checks the cached blocks of the file `name`, found the way an open finds it (RangeFS+Verification.swift):
    /// nothing is dropped without an answer from its server that shows a change.
    package func verify(name: String?) -> VerbOutcome {
        guard let name else { return .failed("name the file to verify; see rangefs status") }
        let found = LockedBox<Result<CatalogItem, FileSystemError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        findForReading(name) { result in
            found.withLock { $0 = result }
            done.signal()
        }
        // A listing or a probe on the way has its own timeouts; this bound only keeps the caller's thread free.
        guard done.wait(timeout: .now() + Self.verifyLookupLimit) == .success, let result = found.withLock({ $0 }) else {
            return .failed("cannot verify \(name): its directory or its server did not answer within "
                           + "\(Int(Self.verifyLookupLimit)) s; try again")
        }
        let item: CatalogItem
        switch result {
        case .success(let validated): item = validated
        case .failure(.notFound), .failure(.notADirectory):
            return .failed("no file named '\(name)' in this mount; see rangefs status")
        case .failure(.isADirectory):
            return .failed("\(name) is a directory; name one of its files")
        case .failure(.io(let reason)):
            return .failed("cannot verify \(name): \(reason)")
        case .failure(let error):
            return .failed("cannot verify \(name): \(error)")
        }
        let checked: Int, failed: Int
        do {
            (checked, failed) = try verifyBlocks(of: item)
        } catch {
            return .failed("cannot verify \(name): \(error)")
        }
        if checked == 0 { return .done("\(name): no block is cached yet; nothing to check") }
        let what = "\(checked) blocks checked against the CRC32C taken when they arrived"
        if failed == 0 { return .done("\(name): \(what), all good") }
        return .foundProblems("\(name): \(what), \(failed) failed and will be fetched again")
    }

    /// The mount's counters as Prometheus text (what `--metrics` serves).
    package var metricsText: String { metrics.prometheusText }
}
