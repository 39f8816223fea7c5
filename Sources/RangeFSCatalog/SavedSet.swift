// The one writer of the saved set of mounted URLs (`catalog.json` in the cache directory), issue 39.
//
// Three places used to write it: the mount adopting an older list's credentials, the mount moving a damaged list
// aside, and the file system saving the mounted set after each verb. They all go through this object now,
// made once per mount and handed to RangeFS (its MountedSet), so the file has one writer and one lock: each save
// takes its snapshot and writes it while no other does, so an older snapshot is never renamed over a newer one.

import FoundationEssentials
import Glibc
import RangeFSCache
import RangeFSSystem

/// The saved set of mounted URLs of one cache: read, replaced whole, or set aside when damaged.
package final class SavedSet: Sendable {
    private let path: String
    /// Held for a whole save, from the snapshot to the rename.
    private let saving = LockedBox(())

    /// The saved set of the cache in `store`.
    package init(store: CacheStore) {
        path = store.root + "/catalog.json"
    }

    /// The saved files, or none if nothing was saved; throws if the file is damaged (the caller says so).
    package func files() throws -> [SavedFile] {
        guard let bytes = try FileSystemCalls.readSmallFile(path) else { return [] }
        return try JSONDecoder().decode([SavedFile].self, from: Data(bytes))
    }

    /// Replaces the saved set with what `snapshot` returns, taken and written while no other save runs.
    package func save(_ snapshot: () throws -> [SavedFile]) throws {
        try saving.withLock { _ in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try FileSystemCalls.replaceAtomically(path, with: Array(try encoder.encode(try snapshot())))
        }
    }

    /// Moves a damaged `catalog.json` aside as `catalog.json.damaged-SECONDS`, so that saving the mounted set
    /// afresh never overwrites what the user may still want; returns the new path.
    package func setAsideDamaged() throws -> String {
        try saving.withLock { _ in
            let aside = path + ".damaged-\(time(nil))"
            guard rename(path, aside) == 0 else {
                throw SystemError(call: "rename", path: path)
            }
            try FileSystemCalls.synchronizeDirectory(containing: path)
            return aside
        }
    }
}
