// How a fetched or kept listing goes into the catalog (DirectoryService.swift fetches it): read as a whole when it is
// plain (PlainListing.swift), else parsed and applied entry by entry.

import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

extension DirectoryService {
    /// Takes a listing's result into the catalog. A body is taken out of `result` (left empty), so that what is
    /// read from it can let it go.
    func read(_ result: inout Result<[UInt8], FetchError>, into inode: UInt64, from url: String, askedAt: Double,
              reported: Bool) -> ListingOutcome {
        let failureLevel: Logger.Level = reported ? .debug : .error
        guard let directory = catalog.directory(inode: inode) else { return .listed }
        let now = MonotonicClock.seconds()
        let shown = Redaction.redact(url)
        var body: [UInt8]
        switch result {
        case .success(let bytes): body = bytes
        case .failure(let error):
            if error.isOriginUnreachable, !directory.listed, let kept = store.savedListing(for: url) {
                if !addWhole(kept, to: inode, listedFrom: url) {
                    let listing = DirectoryListing.parse(kept, base: url)
                    // A kept listing that is cut or damaged says nothing of what the directory held: shown empty (as
                    // it was), it looked like a server that had emptied the directory.
                    if let why = DirectoryListing.problem(with: kept, parsed: listing) {
                        let message = error.userMessage + "; the listing kept from an earlier visit is not shown: " + why
                        logger.log(level: failureLevel, "cannot list \(shown): \(message)")
                        return .failed(message, gone: false)
                    }
                    apply(listing, to: inode, listedFrom: url)
                }
                logger.log(level: reported ? .debug : .warning,
                           "cannot list \(shown) (\(error.userMessage)); showing the listing kept from an earlier visit")
                // Shown now, but read when the mount that kept it read it (if its file says when).
                catalog.markListed(inode, at: now, readAt: store.savedListingAge(for: url).map { now - $0 })
                return .kept(error.userMessage)
            }
            let shows = directory.listed ? "it shows what was listed before" : "reading it fails with EIO"
            logger.log(level: failureLevel, "cannot list \(shown): \(error.userMessage); \(shows)")
            if directory.listed { catalog.markListed(inode, at: now) }  // tried again after the cache time
            return .failed(error.userMessage, gone: error.isGone)
        }
        result = .success([])
        // A JSON listing read to records, the JSON let go here (`body` holds it alone): 200,000 files' listing no
        // longer sits beside its entries and the catalog. The records are what is kept for offline use too.
        if let records = ListingJSON.records(body) { body = records }
        do {
            // The parsed listing lives in this scope only: the memory is given back once it is freed.
            var entries = addWhole(body, to: inode, listedFrom: url) ? catalog.childCount(of: inode) : nil
            if entries == nil {
                let listing = DirectoryListing.parse(body, base: url)
                if let why = DirectoryListing.problem(with: body, parsed: listing) {
                    logger.log(level: failureLevel, "cannot list \(shown): \(why)")
                    return .failed(why, gone: false)
                }
                apply(listing, to: inode, listedFrom: url)
                entries = listing.entries.count
            }
            do {
                try store.saveListing(ListingRedaction.kept(body), for: url)
            } catch {
                logger.warning("cannot keep the listing of \(shown) for offline use: \(error)")
            }
            catalog.markListed(inode, at: now, readAt: askedAt)
            // Parsing a large listing takes many times its size for a moment; give that memory back to the
            // system rather than keep it as the daemon's high-water mark. After the parsed listing is freed, not
            // before (as it was): its 300 bytes per entry then stayed as holes in the heap (issue 46).
            if entries ?? 0 > 10_000 { FileSystemCalls.releaseFreeMemory() }
            return .listed
        }
    }

    /// Adds `body` whole when it is a first listing of plainly named files in name order (PlainListing.swift: an
    /// object store's flat prefix, kept or just read), with no parse into entries; false when it is not one, or
    /// the directory holds children already: then the caller reads it by the rules (`apply`).
    func addWhole(_ body: [UInt8], to inode: UInt64, listedFrom url: String) -> Bool {
        guard catalog.childCount(of: inode) == 0, let listing = PlainListing(records: body),
              catalog.addPlainListing(listing, parent: inode, listingURL: url) else { return false }
        state.withLock { _ = $0.truncated.remove(inode) }
        return true
    }

    /// Makes the children of directory `inode` what `listing` says: new entries are added, entries whose stated
    /// size or date changed take the new ones (a probe sees them again before they are read), and entries the
    /// listing no longer holds are removed (handles open on them keep reading what they opened). Files whose probe
    /// failed may be probed again.
    func apply(_ listing: ParsedListing, to inode: UInt64, listedFrom url: String) {
        let shown = Redaction.redact(url)
        for (link, reason) in listing.skipped.prefix(20) {
            logger.warning("\(shown): skipped the link '\(link.prefix(80))': \(reason)")
        }
        if listing.skipped.count > 20 { logger.warning("\(shown): skipped \(listing.skipped.count - 20) more links") }
        if listing.truncated {
            logger.warning("\(shown) lists more than \(DirectoryListing.maximumEntries) entries; the rest are left out")
        }
        if !listing.controlNames.isEmpty, state.withLock({ $0.reportedControlNames.insert(inode).inserted }) {
            let names = listing.controlNames.prefix(5).map { "'\(DirectoryListing.escapedForLog($0).prefix(80))'" }
            let more = listing.controlNames.count > 5 ? " and \(listing.controlNames.count - 5) more" : ""
            let list = names.joined(separator: ", ") + more
            logger.warning("\(shown): left out \(listing.controlNames.count) names holding control characters (newline, tab, ...), which line-based tools cannot handle: \(list)")
        }
        var existing: [String: CatalogNode] = [:]
        for node in catalog.children(of: inode) {
            switch node {
            case .file(let item) where item.listed: existing[item.metadata.url] = node
            case .directory(let directory) where directory.fromListing: existing[directory.url ?? ""] = node
            default: break
            }
        }
        state.withLock { state in
            if listing.truncated { state.truncated.insert(inode) } else { state.truncated.remove(inode) }
            for case .file(let item) in existing.values { state.failedProbes[item.inode] = nil }
        }
        // A first listing of files only (a bucket's flat prefix, a kept listing at a remount) adds them as they are:
        // gathered one by one below, a million entries were copied for nothing.
        if existing.isEmpty && !listing.entries.contains(where: \.isDirectory) {
            return catalog.addListed(listing.entries, parent: inode, listingURL: url)
        }
        let depth = catalog.depth(of: inode)
        // What is left of `existing` once the listing is gone through is what it no longer holds: one lookup per
        // entry, and no set of a million URLs beside the listing.
        var added: [ListedEntry] = []
        for entry in listing.entries {
            switch existing.isEmpty ? nil : existing.removeValue(forKey: entry.url) {
            case .file(let item):
                let stated = entry.size != nil && entry.modificationTime != nil
                let metadata = RemoteMetadata(url: entry.url, size: entry.size ?? 0, etag: entry.etag ?? "",
                                              lastModified: entry.modificationTime.map(HTTPDate.format) ?? "")
                let newETag = entry.etag != nil && entry.etag != item.metadata.etag
                // The same date to another precision (JSON, then HTML) proves something else (ListedDate.swift).
                if stated && (item.metadata.size != metadata.size || item.listedTime != entry.modificationTime
                              || item.listedPrecision != entry.datePrecision || newETag) {
                    // Noted before the catalog changes, so that no open finds the one without the other.
                    events.changed(item.inode)
                    catalog.updateListed(inode: item.inode, metadata: metadata, listedTime: entry.modificationTime,
                                         listedPrecision: entry.datePrecision)
                }
            case .directory:
                break
            case nil where entry.isDirectory:
                guard depth < Self.maximumDepth else {
                    logger.warning("\(shown): the subdirectory '\(entry.name)' is \(Self.maximumDepth + 1) levels deep; deeper levels are left out")
                    continue
                }
                catalog.addDirectory(url: entry.url, explicitName: entry.name, parent: inode, fromListing: true,
                                     modificationTime: entry.modificationTime)
            case nil:
                added.append(entry)
            }
        }
        catalog.addListed(added, parent: inode, listingURL: url)
        for (childURL, node) in existing {
            logger.info("\(Redaction.redact(childURL)) is no longer listed by its server; it leaves the mount")
            catalog.removeNode(node.inode)
            events.removed(inode, node.name)
        }
    }
}
