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

    /// Lists directory `inode` if it has a URL and was not listed yet. Concurrent callers wait for the one
    /// listing. A listing that fails leaves the directory empty, with a log line, and is tried again 10 s later.
    func listIfNeeded(_ inode: UInt64) {
        guard let directory = catalog.directory(inode: inode), directory.url != nil, !directory.listed else { return }
        directoryWork.withLock { failures in
            guard let current = catalog.directory(inode: inode), let url = current.url, !current.listed else { return }
            let now = Self.monotonicNow()
            if let failed = failures[inode], now - failed < Self.listingRetryAfter { return }
            switch scheduler.fetcher.fetchListing(url, limit: Self.listingLimit) {
            case .failure(let error) where error.isOriginUnreachable:
                // Offline: the listing kept from an earlier visit, if there is one.
                guard let kept = store.savedListing(for: url) else { fallthrough }
                logger.warning("cannot list \(Redaction.redact(url)) (\(error.userMessage)); showing the listing kept from an earlier visit")
                add(DirectoryListing.parse(kept, base: url), to: inode, listedFrom: url)
                catalog.markListed(inode)
            case .failure(let error):
                failures[inode] = now
                logger.error("cannot list \(Redaction.redact(url)): \(error.userMessage); the directory shows empty")
            case .success(let body):
                failures[inode] = nil
                do {
                    try store.saveListing(body, for: url)
                } catch {
                    logger.warning("cannot keep the listing of \(Redaction.redact(url)) for offline use: \(error)")
                }
                add(DirectoryListing.parse(body, base: url), to: inode, listedFrom: url)
                catalog.markListed(inode)
            }
        }
    }

    private func add(_ listing: ParsedListing, to inode: UInt64, listedFrom url: String) {
        let shown = Redaction.redact(url)
        for (link, reason) in listing.skipped {
            logger.warning("\(shown): skipped the link '\(link.prefix(80))': \(reason)")
        }
        if listing.truncated {
            logger.warning("\(shown) lists more than \(DirectoryListing.maximumEntries) entries; the rest are left out")
        }
        for entry in listing.entries {
            if entry.isDirectory {
                catalog.addDirectory(url: entry.url, explicitName: entry.name, parent: inode,
                                     modificationTime: entry.modificationTime)
                continue
            }
            let metadata = RemoteMetadata(url: entry.url, size: entry.size ?? 0, etag: "",
                                          lastModified: entry.modificationTime.map(HTTPDate.format) ?? "")
            catalog.add(metadata, explicitName: entry.name, parent: inode, listed: true, validated: false,
                        attributesExact: entry.size != nil && entry.modificationTime != nil)
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
            for (file, result) in zip(batch, scheduler.fetcher.probeAll(batch.map(\.metadata.url))) {
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
        switch scheduler.fetcher.probeAll([item.metadata.url])[0] {
        case .success(let metadata):
            catalog.update(inode: item.inode, metadata: metadata)
            markValidated(metadata.url)
            return .success(catalog.item(inode: item.inode) ?? item)
        case .failure(let error) where error.isOriginUnreachable && store.storedMetadata(for: item.metadata.url) != nil:
            // Offline: served from its cache entry, like a file mounted from the cache alone.
            catalog.update(inode: item.inode, metadata: store.storedMetadata(for: item.metadata.url)!)
            markOffline(item.metadata.url, reason: error.userMessage)
            return .success(catalog.item(inode: item.inode) ?? item)
        case .failure(let error):
            return .failure(.io(error.userMessage))
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

    static func monotonicNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
