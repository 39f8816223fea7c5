// Where the store's and the scheduler's events go (issue 39).
//
// The store and the scheduler are made before the file system (the mount needs the cache's lock and its saved
// files before anything is probed), and the file system is made from them; yet what they report is the file
// system's business: a file whose data became durable is checked against its digest, an entry with a fill queued
// or a digest check running stays open, a remote change is probed again. That is a cycle. It is broken here, by
// one object that the composer makes first and that all three hold: the store and the scheduler get their
// `Events` from it at their birth, and the file system, in its `init`, is the one thing it forwards to. No closure
// is ever assigned to the store, the scheduler or the file system after their `init`.
//
//     let events = FileSystemEvents()
//     let store = try CacheStore(root: root, events: events.store, metrics: metrics, logger: logger)
//     let scheduler = FetchScheduler(fetcher: fetcher, events: events.scheduler, metrics: metrics, logger: logger)
//     let fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler, events: events, ...)
//
// The store's and the scheduler's closures hold this object strongly, and it holds the file system weakly: the
// file system holds the store and the scheduler, so a strong reference back would keep all of them alive for ever.
// Until the file system is made (and after it is gone), an event finds nobody: no entry is kept open for it, and
// a completion or a remote change found then is handled as before the file system existed (the next open checks).

import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import Synchronization

/// The object the store, the scheduler and the file system share: the store's and the scheduler's events,
/// forwarded to the file system made from them.
package final class FileSystemEvents: Sendable {
    private struct Target {
        weak var fileSystem: RangeFS?
        var attached = false
    }

    private let target = Mutex(Target())

    package init() {}

    /// The file system these events go to, once it is made.
    private var fileSystem: RangeFS? {
        target.withLock { $0.fileSystem }
    }

    /// Called once, by `RangeFS.init`: one set of events serves one file system.
    func attach(_ fileSystem: RangeFS) {
        target.withLock { target in
            precondition(!target.attached, "one FileSystemEvents serves one RangeFS")
            target.attached = true
            target.fileSystem = fileSystem
        }
    }

    /// The events to give the store.
    package var store: CacheStore.Events {
        var events = CacheStore.Events()
        // An entry with a fill queued or running, or its digest check, stays open while nobody reads it.
        events.hasWork = { [self] entry in
            guard let fileSystem else { return false }
            return fileSystem.scheduler.isFilling(entry) || fileSystem.scheduler.isTransferring(entry)
                || fileSystem.isCheckingDigest(of: entry)
        }
        // A file whose whole data just became durable is checked against its digest.
        events.completed = { [self] entry in fileSystem?.checkDigest(of: entry, again: true) }
        // An entry of unknown size was settled at its size, or given more room (RangeFS+UnknownSize.swift).
        events.reshaped = { [self] old, new in fileSystem?.entryReshaped(old, into: new) }
        return events
    }

    /// The events to give the scheduler.
    package var scheduler: FetchScheduler.Events {
        var events = FetchScheduler.Events()
        events.remoteChanged = { [self] changed in
            if let entry = changed as? CacheEntry { fileSystem?.revalidator.revalidate(entry, knownChanged: true) }
        }
        return events
    }

    /// The events to give the revalidator: it opens entries through the file system.
    var revalidator: Revalidator.Events {
        var events = Revalidator.Events()
        events.entry = { [self] item in
            guard let fileSystem else { return nil }
            do {
                return try fileSystem.entry(for: item)
            } catch {
                fileSystem.logger.error("cannot open the cache for \(item.name) to check it against its server: \(error)")
                return nil
            }
        }
        return events
    }

    /// A file of a directory was fetched ahead of its reader (DirectoryPrefetch.swift): its cached entry is made
    /// ready for the open to come.
    func fetchedAhead(_ file: CatalogItem) {
        fileSystem?.prepareEntry(of: file)
    }

    /// Stores the first bytes a listed file's probe brought, through the file system (RangeFS+FirstBytes.swift).
    func storeFirstBytes(_ body: FirstBytes.Body, of metadata: RemoteMetadata) {
        guard let fileSystem else { return body.discard() }
        fileSystem.store(firstBytes: body, of: metadata)
    }
}
