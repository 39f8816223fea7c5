// Files whose server cannot be reached (DESIGN.md §8).
//
// A URL whose probe fails at mount for a network reason (refused, unresolvable, timed out, cut off, 5xx) but that
// has a cache entry is mounted from the entry's header: its size, date and validator. Its cached blocks are
// served; an uncached block fails with EIO after the usual retries. Every `offlineCheckInterval` the offline URLs
// are probed again, all at once, on the revalidation queue; the first answer from the server ends the offline
// state and goes through the usual remote-change rules, so a file that changed meanwhile gets its new version.
// Fetches need not wait for that: each one carries If-Range, so a changed file is noticed either way.
//
// A saved URL that cannot be reached and has nothing cached is not mounted, but it stays in the saved set
// (`unmountedSaved`): only `rangefs rm` or a 404/410 removes a URL from it.

import Dispatch
import Foundation

extension RangeFS {
    /// How often offline files are probed again.
    public static let offlineCheckInterval: Duration = .seconds(5)

    /// Records that `url` is served from its cache alone because its server could not be reached (`reason`).
    public func markOffline(_ url: String, reason: String) {
        offline.withLock { $0[url] = reason }
    }

    /// Why `url` is offline, or nil if its server answered.
    public func offlineReason(_ url: String) -> String? {
        offline.withLock { $0[url] }
    }

    /// Saved files that are not mounted this run; they stay saved (see `saveCatalog`).
    public func keepUnmounted(_ files: [SavedFile]) {
        unmountedSaved.withLock { $0 = files }
    }

    /// The saved files that are not mounted this run.
    public var unmountedFiles: [SavedFile] {
        unmountedSaved.withLock { $0 }
    }

    /// Starts probing the offline files every `interval` until `stopOfflineChecks`.
    public func startOfflineChecks(every interval: Duration = RangeFS.offlineCheckInterval) {
        let timer = DispatchSource.makeTimerSource(queue: revalidationQueue)
        timer.schedule(deadline: .now() + interval.dispatchInterval, repeating: interval.dispatchInterval)
        timer.setEventHandler { [weak self] in self?.checkOfflineFiles() }
        timer.resume()
        let handle = RepeatingTimer(timer)
        offlineTimer.withLock { $0?.timer.cancel(); $0 = handle }
    }

    public func stopOfflineChecks() {
        offlineTimer.withLock { $0?.timer.cancel(); $0 = nil }
    }

    /// Probes every offline file at once and acts on the answers (on the revalidation queue).
    func checkOfflineFiles() {
        let urls = offline.withLock { Array($0.keys) }
        guard !urls.isEmpty else { return }
        let items = urls.compactMap { url in catalog.items.first { $0.metadata.url == url } }
        let entries = items.compactMap { try? entry(for: $0) }
        guard !entries.isEmpty else { return }
        for (entry, result) in zip(entries, probe(entries.map(\.header.url))) {
            apply(result, to: entry, knownChanged: false)
        }
    }
}

/// A dispatch timer, to keep in a lock.
final class RepeatingTimer: @unchecked Sendable {
    // @unchecked Sendable: dispatch sources may be cancelled from any thread, and `timer` never changes.
    let timer: DispatchSourceTimer
    init(_ timer: DispatchSourceTimer) { self.timer = timer }
}
