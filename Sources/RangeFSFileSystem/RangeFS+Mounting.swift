// What the mount tells its file system as it starts (issue 48: the executable reaches no part of the core either):
// which files its probes validated and which are served offline, the saved files it could not mount, the pins an
// earlier mount saved; and what the FUSE adapter's statfs reports.
import RangeFSCache
import RangeFSCatalog

extension RangeFS {
    /// Records the mount's probes: `offline` maps the URL of each file served from the cache alone (its server
    /// could not be reached) to why; every other file of the catalog was validated by its probe just now. The
    /// offline files are checked again every `Revalidator.offlineCheckInterval` once `startOfflineChecks` runs.
    package func markProbed(offline: [String: String]) {
        for item in catalog.items where offline[item.metadata.url] == nil {
            revalidator.markValidated(item.metadata.url)
        }
        for (url, reason) in offline { revalidator.markOffline(url, reason: reason) }
    }

    /// Starts checking the offline files again until their servers answer (once the mount is up).
    package func startOfflineChecks() {
        revalidator.startOfflineChecks()
    }

    /// Stops those checks (the mount is ending).
    package func stopOfflineChecks() {
        revalidator.stopOfflineChecks()
    }

    /// Keeps `files`, saved files the mount could not mount (unreachable, nothing cached), in the saved set: they
    /// show in status as unmounted, and `rangefs rm NAME` drops them.
    package func keepUnmounted(_ files: [SavedFile]) {
        mountedSet.keepUnmounted(files)
    }

    /// Pins the files saved as pinned (at mount): they are filled and never evicted.
    package func restorePins(_ saved: [SavedFile]) {
        for file in saved where file.pinned == true {
            guard let item = catalog.item(url: file.url) else { continue }
            let entry: CacheEntry
            do {
                entry = try self.entry(for: item)
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

    /// The files of the mount and their bytes, for statfs (the catalog keeps them as files come and go).
    package var totals: (files: Int, bytes: UInt64) { catalog.totals }
}
