// What a mount keeps of the set of files it serves, beyond its catalog (issue 48: the core's own state, which the
// control channel only asks about): the one writer of the saved set, the saved files this run did not mount, the
// URLs being added, and the lock that orders saves of the credentials.
//
// Lock order: `credentialsSaving` first, then the catalog's, `adding`, the saved files', the mirrors' and the
// credential table's own locks, each taken alone and never held while waiting for `credentialsSaving`.

import RangeFSCatalog
import RangeFSSystem

/// The mount's set of files as it is saved with the cache (RangeFS+Saving.swift), and the adds in flight.
final class MountedSet: Sendable {
    /// The one writer of the saved set (SavedSet.swift), the mount's.
    let savedSet: SavedSet
    /// Saved files not mounted this run (unreachable, nothing cached): they stay in the saved set.
    private let unmountedSaved = LockedBox<[SavedFile]>([])
    /// URLs being added: two `rangefs add` of one URL at once make one file.
    let adding = LockedBox<Set<String>>([])
    /// Serializes saves of the credentials: each takes its snapshot and writes it while no other does, so an
    /// older snapshot is never renamed over a newer one.
    let credentialsSaving = LockedBox(())

    init(savedSet: SavedSet) {
        self.savedSet = savedSet
    }

    /// The saved files that are not mounted this run.
    var unmounted: [SavedFile] {
        unmountedSaved.withLock { $0 }
    }

    /// Adds `files`, saved files the mount could not mount, to those kept unmounted.
    func keepUnmounted(_ files: [SavedFile]) {
        unmountedSaved.withLock { $0 += files }
    }

    /// Drops the unmounted saved file of `url` (it is mounted now).
    func mounted(_ url: String) {
        unmountedSaved.withLock { $0.removeAll { $0.url == url } }
    }

    /// Takes the unmounted saved file named `name` out of the set, if there is one.
    func takeUnmounted(named name: String) -> SavedFile? {
        unmountedSaved.withLock { files -> SavedFile? in
            guard let index = files.firstIndex(where: { FileName.same($0.name, name) }) else { return nil }
            return files.remove(at: index)
        }
    }
}
