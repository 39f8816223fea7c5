// `rangefs verify NAME` on a running mount: find the file the way `cat` would, then check its cached blocks.
//
// Issue 35: after a remount, a file of a listed directory is in the catalog with what its listing states (size,
// a date to the minute, no ETag), and no probe has seen it. Opening its cache entry with those attributes made
// the store take the listing for a new version ("changed on the server; dropping its cached data") without any
// answer from the server: verify reported "0 blocks checked, all good" and had destroyed a good file. So verify
// goes the way of an open: each directory on the path is listed if it was not, and the file is validated as an
// open validates it (`DirectoryService.whenValidated`): a cached version that agrees with the listing is taken
// as it is, with no request; anything else is probed, and only a probe's answer can show a change.
//
// What verify can vouch for: the CRC32C of each block was taken when the block arrived, over bytes that had
// passed the answer's checks. A block that matches it is the block that arrived; whether the server sent the
// right bytes is what the answer checks and the file's digest (where one is known) are for.

import Dispatch
import RangeFSCache
import RangeFSCatalog

extension RangeFS {
    /// Calls `completion` with the file at `path` (`name`, or `folder/name` from the root) as an open would find
    /// it: every directory on the way listed if it was not, and the file's validators known (see above). Fails
    /// with `.notFound` if there is no such file, `.isADirectory` for a directory, or the probe's error.
    func findForReading(_ path: String,
                        completion: @escaping @Sendable (Result<CatalogItem, FileSystemError>) -> Void) {
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else { return completion(.failure(.notFound)) }
        walk(components[...], from: Catalog.rootInode) { [self] result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let item): directories.whenValidated(item, completion)
            }
        }
    }

    /// Looks `components` up one by one from directory `parent`, listing each directory before its lookup.
    private func walk(_ components: ArraySlice<String>, from parent: UInt64,
                      completion: @escaping @Sendable (Result<CatalogItem, FileSystemError>) -> Void) {
        guard let name = components.first else { return completion(.failure(.isADirectory)) }
        directories.whenListed(parent) { [self] in
            if let failure = directories.listingFailure(of: parent) { return completion(.failure(.io(failure))) }
            switch catalog.node(named: name, in: parent) {
            case .file(let item) where components.count == 1: completion(.success(item))
            case .file: completion(.failure(.notADirectory))
            case .directory(let directory): walk(components.dropFirst(), from: directory.inode, completion: completion)
            case nil: completion(.failure(.notFound))
            }
        }
    }

    /// Checks every block of `item` (validated) present in the cache against the CRC32C taken when it arrived;
    /// those that fail become absent and are fetched again on their next read. Opens the entry of the version
    /// the catalog holds, which after `findForReading` is the cached one unless a probe found another.
    func verifyBlocks(of item: CatalogItem) throws(CacheError) -> (checked: Int, failed: Int) {
        try entry(for: item).verifyAll()
    }
}
