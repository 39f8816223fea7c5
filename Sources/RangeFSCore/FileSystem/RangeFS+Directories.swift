// Directory URLs as trees (DESIGN.md §7).
//
// A directory is listed on its first lookup or readdir, never at mount: one GET that asks for JSON first. Its
// subdirectories become directories of the mount (listed in turn when they are first visited), its files become
// listed files. A listed file whose size and date the listing states exactly (nginx and Caddy JSON) needs no
// request until it is opened; any other one is probed on its first lookup, with up to `probeBatch` of its
// unprobed siblings at once, since `ls -l` looks them up one after another. `readdir` alone never probes. Opening
// a listed file that no probe has seen probes it first, for its validators.
//
// Each listing read is kept in the cache (`listings/`), so that while the server cannot be reached the tree shows
// as it was last seen, and files read before are served from their cache entries.

import Foundation
import Glibc

extension RangeFS {
    /// The largest listing read, in bytes.
    public static let listingLimit = 16 << 20
    /// Files probed at once when a lookup needs a probe.
    public static let probeBatch = 32
    /// How long a failed listing is not tried again, in seconds.
    static let listingRetryAfter = 10.0
    /// The deepest a listed tree goes: subdirectories below this depth are left out, with a log line (a server
    /// whose links make an endless tree, `a/a/a/...`, stops here).
    public static let maximumDepth = 64

    /// Lists directory `inode` if it has a URL and was not listed yet. Concurrent callers wait for the one
    /// listing. A listing that fails leaves the directory empty, with a log line, and is tried again 10 s later.
    /// A directory listed longer than `directoryCacheTime` ago is listed again in the background; meanwhile it
    /// shows what the last listing held.
    func listIfNeeded(_ inode: UInt64) {
        guard let directory = catalog.directory(inode: inode), directory.url != nil else { return }
        if directory.listed {
            if let listedAt = directory.listedAt,
               Self.monotonicSeconds() - listedAt > settings.directoryCacheTime.seconds {
                refresh(inode)
            }
            return
        }
        directoryWork.withLock { failures in
            guard let current = catalog.directory(inode: inode), !current.listed else { return }
            list(current, failures: &failures)
        }
    }

    /// Lists directory `inode` again in the background (once at a time), adding what is new and removing what
    /// is gone.
    private func refresh(_ inode: UInt64) {
        guard refreshing.withLock({ $0.insert(inode).inserted }) else { return }
        revalidationQueue.async { [self] in
            defer { refreshing.withLock { _ = $0.remove(inode) } }
            directoryWork.withLock { failures in
                guard let current = catalog.directory(inode: inode) else { return }
                list(current, failures: &failures)
            }
        }
    }

    /// Reads the listing of `directory` into the catalog (under `directoryWork`).
    private func list(_ directory: CatalogDirectory, failures: inout [UInt64: Double]) {
        guard let url = directory.url else { return }
        let inode = directory.inode
        let now = Self.monotonicSeconds()
        if let failed = failures[inode], now - failed < Self.listingRetryAfter { return }
        let fetched = scheduler.fetcher.fetchListing(url, limit: Self.listingLimit)
        if case .failure(let error) = fetched, error.isOriginUnreachable, !directory.listed,
           let kept = store.savedListing(for: url) {
            // Offline: the listing kept from an earlier visit.
            logger.warning("cannot list \(Redaction.redact(url)) (\(error.userMessage)); showing the listing kept from an earlier visit")
            apply(DirectoryListing.parse(kept, base: url), to: inode, listedFrom: url)
            catalog.markListed(inode, at: now)
            return
        }
        switch fetched {
        case .failure(let error):
            failures[inode] = now
            let shows = directory.listed ? "it shows what was listed before" : "the directory shows empty"
            logger.error("cannot list \(Redaction.redact(url)): \(error.userMessage); \(shows)")
            if directory.listed { catalog.markListed(inode, at: now) }  // tried again after the cache time
        case .success(let body):
            failures[inode] = nil
            do {
                try store.saveListing(body, for: url)
            } catch {
                logger.warning("cannot keep the listing of \(Redaction.redact(url)) for offline use: \(error)")
            }
            apply(DirectoryListing.parse(body, base: url), to: inode, listedFrom: url)
            catalog.markListed(inode, at: now)
        }
    }

    /// Makes the children of directory `inode` what `listing` says: new entries are added, entries whose stated
    /// size or date changed take the new ones (a probe sees them again before they are read), and entries the
    /// listing no longer holds are removed (handles open on them keep reading what they opened).
    private func apply(_ listing: ParsedListing, to inode: UInt64, listedFrom url: String) {
        let shown = Redaction.redact(url)
        for (link, reason) in listing.skipped {
            logger.warning("\(shown): skipped the link '\(link.prefix(80))': \(reason)")
        }
        if listing.truncated {
            logger.warning("\(shown) lists more than \(DirectoryListing.maximumEntries) entries; the rest are left out")
        }
        var existing: [String: CatalogNode] = [:]
        for node in catalog.children(of: inode) {
            switch node {
            case .file(let item) where item.listed: existing[item.metadata.url] = node
            case .directory(let directory) where directory.fromListing: existing[directory.url ?? ""] = node
            default: break
            }
        }
        var seen = Set<String>()
        for entry in listing.entries {
            seen.insert(entry.url)
            let metadata = RemoteMetadata(url: entry.url, size: entry.size ?? 0, etag: "",
                                          lastModified: entry.modificationTime.map(HTTPDate.format) ?? "")
            switch existing[entry.url] {
            case .file(let item):
                let stated = entry.size != nil && entry.modificationTime != nil
                if stated && (item.metadata.size != metadata.size
                              || item.metadata.modificationTime != metadata.modificationTime) {
                    catalog.updateListed(inode: item.inode, metadata: metadata)
                }
            case .directory:
                break
            case nil where entry.isDirectory:
                guard catalog.depth(of: inode) < Self.maximumDepth else {
                    logger.warning("\(shown): the subdirectory '\(entry.name)' is \(Self.maximumDepth + 1) levels deep; deeper levels are left out")
                    continue
                }
                catalog.addDirectory(url: entry.url, explicitName: entry.name, parent: inode, fromListing: true,
                                     modificationTime: entry.modificationTime)
            case nil:
                catalog.add(metadata, explicitName: entry.name, parent: inode, listed: true, validated: false,
                            attributesExact: entry.size != nil && entry.modificationTime != nil)
            }
        }
        for (childURL, node) in existing where !seen.contains(childURL) {
            logger.info("\(Redaction.redact(childURL)) is no longer listed by its server; it leaves the mount")
            catalog.removeNode(node.inode)
        }
    }

    /// A listed file with its size and date known: probes it first if the listing did not state them exactly
    /// (with up to `probeBatch` of the siblings that follow it, at once).
    func withExactAttributes(_ item: CatalogItem) -> CatalogItem {
        guard item.listed, !item.validated, !item.attributesExact else { return item }
        directoryWork.withLock { _ in
            guard let current = catalog.item(inode: item.inode), !current.validated else { return }
            let following = catalog.children(of: item.parent).compactMap { node -> CatalogItem? in
                guard case .file(let sibling) = node, sibling.name > item.name, sibling.listed, !sibling.validated,
                      !sibling.attributesExact
                else { return nil }
                return sibling
            }
            let batch = [current] + following.prefix(Self.probeBatch - 1)
            for (file, result) in zip(batch, probe(batch.map(\.metadata.url))) {
                switch result {
                case .success(let metadata): catalog.update(inode: file.inode, metadata: metadata)
                case .failure(let error):
                    if error.isOriginUnreachable, let stored = store.storedMetadata(for: file.metadata.url) {
                        catalog.update(inode: file.inode, metadata: stored)  // what its cache entry knows
                        markOffline(file.metadata.url, reason: error.userMessage)
                    } else {
                        logger.info("cannot probe \(Redaction.redact(file.metadata.url)): \(error.userMessage)")
                    }
                }
            }
        }
        return catalog.item(inode: item.inode) ?? item
    }

    /// A listed file that a probe has seen, so that its cache entry is made for the server's validators; probes
    /// it now if needed (on open). Fails if the probe fails.
    func validated(_ item: CatalogItem) -> Result<CatalogItem, FileSystemError> {
        guard item.listed, !item.validated else { return .success(item) }
        switch probe([item.metadata.url])[0] {
        case .success(let metadata):
            catalog.update(inode: item.inode, metadata: metadata)
            markValidated(metadata.url)
            return .success(catalog.item(inode: item.inode) ?? item)
        case .failure(let error):
            // Offline: served from its cache entry, like a file mounted from the cache alone.
            guard error.isOriginUnreachable, let stored = store.storedMetadata(for: item.metadata.url) else {
                return .failure(.io(error.userMessage))
            }
            catalog.update(inode: item.inode, metadata: stored)
            markOffline(item.metadata.url, reason: error.userMessage)
            return .success(catalog.item(inode: item.inode) ?? item)
        }
    }

    /// The contents of directory `inode`, listing it first if needed.
    public func directoryContents(_ inode: UInt64) -> Result<[CatalogNode], FileSystemError> {
        guard catalog.directory(inode: inode) != nil else {
            return .failure(catalog.item(inode: inode) == nil ? .notFound : .notADirectory)
        }
        listIfNeeded(inode)
        return .success(catalog.children(of: inode))
    }

    /// Whether `inode` is a directory of the mount.
    public func isDirectory(_ inode: UInt64) -> Bool {
        catalog.directory(inode: inode) != nil
    }

    /// The parent directory of directory `inode` (the root's is itself).
    public func parent(of inode: UInt64) -> UInt64 {
        catalog.directory(inode: inode)?.parent ?? Catalog.rootInode
    }
}
