// How the file system's own parts reach it (issue 39, issue 48).
//
// The revalidator, the directory service and the directory prefetch are made in `RangeFS.init`, before the file
// system exists, yet three of their steps are the file system's: the revalidator opens entries through it, the
// directory service stores a probe's first bytes through it, the prefetch prepares a fetched file's entry through
// it. This object, made first in `RangeFS.init` and given to them, forwards those to the file system, which
// `init` attaches last. All of them are of this layer: nothing below the file system holds this object (the
// store and the scheduler report through a queue the file system drains: EntryEvent.swift).
//
// It holds the file system weakly: the file system holds these parts, so a strong reference back would keep all of
// them alive for ever. What is left to do (issue 48): make these parts from a part of the file system that exists
// before them (the opening of entries), so that nothing is attached after an `init`.

import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import Synchronization

/// What the file system's own parts ask of it while it is being made: forwarded to it once it is.
final class FileSystemEvents: Sendable {
    private struct Target {
        weak var fileSystem: RangeFS?
        var attached = false
    }

    private let target = Mutex(Target())

    init() {}

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
