// The end-to-end digest checks of complete files (the order of the sources and what a mismatch does are described
// in DigestChecks.swift).

import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSSystem

extension RangeFS {
    /// Sets up the file `metadata` describes: fetched from `mirrors` too (and, with `mirrorsFromLinks`, from the
    /// duplicates its probe's `Link` headers named; off by default, since a server then chooses where the bytes
    /// come from), and checked against `checksum` (`sha256=HEX`, as the user gave it) once complete. Each mirror
    /// is probed now, in the background. No mirror at all forgets any the file had.
    public func configure(_ metadata: RemoteMetadata, mirrors: [String], checksum: String? = nil,
                          mirrorsFromLinks: Bool = false) {
        if !mirrors.isEmpty || mirrorsFromLinks || scheduler.mirrors.mirrors(of: metadata.url) != nil {
            scheduler.useMirrors(mirrors + (mirrorsFromLinks ? metadata.duplicates : []), for: metadata)
        }
        guard let checksum, let digest = ContentDigest(parsing: checksum) else { return }
        digests.given.withLock { $0[metadata.url] = digest }
        // A file already complete is checked against it now.
        if let entry = store.openEntry(for: metadata.url), entry.digestRecord == nil { checkDigest(of: entry) }
    }

    /// The digest the user gave for `url`, if any (saved with the file).
    func givenDigest(of url: String) -> ContentDigest? {
        digests.given.withLock { $0[url] }
    }

    /// Checks the complete file of `entry` against its expected digest, in the background, unless it is being
    /// checked now or, without `again`, was checked already. A file without a known digest stays unverified.
    /// `again`: the file just became complete (after an eviction or a refetch): whatever was recorded is checked anew.
    /// `item`: the catalog's file being opened, if the caller has it (looking it up by URL cost an open of a
    /// complete file a tenth of its time: issue 46).
    func checkDigest(of entry: CacheEntry, again: Bool = false, item: CatalogItem? = nil) {
        guard entry.isComplete, !entry.isStale else { return }
        if !again, let record = entry.digestRecord, record.verdict != .refetching { return }
        guard digests.running.withLock({ $0.insert(entry.directory).inserted }) else { return }
        // The store keeps the entry open until its check ends (EntryUse.addWork).
        entry.use.addWork(1)
        let url = entry.header.url
        expectedDigest(for: url, item: item) { [self] expected in
            guard let expected else {
                digests.running.withLock { _ = $0.remove(entry.directory) }
                entry.use.addWork(-1)
                return
            }
            digests.queue.async { [self] in
                defer {
                    digests.running.withLock { _ = $0.remove(entry.directory) }
                    entry.use.addWork(-1)
                }
                guard let computed = entry.computeDigest(expected.digest.algorithm) else { return }
                judge(entry, expected: expected, computed: computed)
            }
        }
    }

    /// Whether `entry`'s digest check is queued or running.
    func isCheckingDigest(of entry: CacheEntry) -> Bool {
        digests.isChecking(entry)
    }

    /// Acts on a check's result: a match is recorded; a first mismatch drops the file and fetches it again, from
    /// other mirrors where it has them; a second one makes the file serve nothing.
    private func judge(_ entry: CacheEntry, expected: ExpectedDigest, computed: ContentDigest) {
        let url = entry.header.url, shown = Redaction.redact(url)
        let refetched = entry.digestRecord?.verdict == .refetching
        var record = DigestRecord(generation: entry.header.generation, verdict: .verified, expected: expected.digest,
                                  computed: computed, origin: expected.origin)
        if computed == expected.digest {
            entry.record(record)
            metrics.add("rangefs_digest_checks_total", labels: ["result": "verified"])
            logger.info("\(shown) is verified: its \(computed.algorithm.rawValue) matches \(expected.origin)")
            if refetched, let mirrorSet = scheduler.mirrors.mirrors(of: url) { mirrorSet.endRefetch() }
            return
        }
        let mismatch = "its \(computed.algorithm.rawValue) is \(computed.hex), but \(expected.origin) says "
            + "\(expected.digest.hex)"
        if refetched {
            record.verdict = .mismatch
            entry.record(record)
            metrics.add("rangefs_digest_checks_total", labels: ["result": "mismatch"])
            logger.error("\(shown) fails its digest check again after a refetch: \(mismatch); its opens fail with EIO until it changes on the server or rangefs evict drops it")
        } else {
            metrics.add("rangefs_digest_checks_total", labels: ["result": "refetch"])
            let mirrorSet = scheduler.mirrors.mirrors(of: url)
            mirrorSet?.beginRefetch()
            let how = mirrorSet == nil ? "" : ", each part from another mirror than before"
            logger.warning("\(shown) fails its digest check: \(mismatch); fetching it again\(how)")
            // The drop is made durable before the record says a refetch is under way: a crash in between leaves
            // an incomplete file with no record, which is checked afresh, never one judged on its old bytes.
            _ = entry.dropAllBlocks()
            do {
                try entry.commit()
            } catch {
                logger.warning("cannot commit the drop of \(shown) before its refetch: \(error)")
            }
            record.verdict = .refetching
            entry.record(record)
            scheduler.fill(entry, url: url)
        }
        // The kernel may hold pages of the wrong bytes: it must ask again (and get EIO, or the new bytes); and the
        // attributes of a file complete when it was opened (`cachedBytesSettled`), whose blocks just went.
        for item in catalog.items(url: url) {
            kernel.forgetPages(of: item.inode)
        }
        opener.entryOpened(url: url)
    }

    /// Finds the digest `url`'s file is expected to have (see DigestChecks.swift for the order); `completion` gets
    /// nil when none is known. Reading a sums file happens once per sums file, whoever asks.
    /// `known`: the catalog's file of `url`, if the caller has it.
    func expectedDigest(for url: String, item known: CatalogItem? = nil,
                        completion: @escaping @Sendable (ExpectedDigest?) -> Void) {
        if let given = givenDigest(of: url) { return completion(ExpectedDigest(digest: given, origin: "--checksum")) }
        guard let item = known.flatMap({ $0.metadata.url == url ? $0 : nil }) ?? catalog.item(url: url) else {
            return completion(nil)
        }
        if let announced = item.metadata.announcedDigest {
            return completion(ExpectedDigest(digest: announced, origin: "the server's Repr-Digest"))
        }
        guard item.listed else { return completion(nil) }
        let candidates = catalog.fileURLs(named: DigestChecks.sumsNames(for: item.name), in: item.parent)
        lookUp(item.name, in: candidates[...], completion: completion)
    }

    /// Looks `name` up in the first of `sumsURLs` that lists it.
    private func lookUp(_ name: String, in sumsURLs: ArraySlice<String>,
                        completion: @escaping @Sendable (ExpectedDigest?) -> Void) {
        guard let sumsURL = sumsURLs.first else { return completion(nil) }
        readSums(sumsURL, fallbackName: name) { [self] listed in
            if let digest = listed[FileName(name)] {
                completion(ExpectedDigest(digest: digest, origin: Redaction.redact(sumsURL)))
            } else {
                lookUp(name, in: sumsURLs.dropFirst(), completion: completion)
            }
        }
    }

    /// The digests the sums file at `url` lists, read with one request the first time anyone asks (and again
    /// after a failed read, on the next check).
    private func readSums(_ url: String, fallbackName: String,
                          completion: @escaping @Sendable ([FileName: ContentDigest]) -> Void) {
        let (start, known) = digests.sums.withLock { files -> (Bool, [FileName: ContentDigest]?) in
            switch files[url] {
            case .loaded(let listed)?:
                return (false, listed)
            case .failed(let at)? where MonotonicClock.seconds() - at < DigestChecks.sumsRetry:
                return (false, [:])
            case .loading(let waiting)?:
                files[url] = .loading(waiting + [completion])
                return (false, nil)
            case nil, .failed?:
                files[url] = .loading([completion])
                return (true, nil)
            }
        }
        if let known { return completion(known) }
        guard start else { return }
        let timeout = settings.listingTimeout.seconds
        scheduler.fetcher.fetchListing(url, limit: DigestChecks.sumsLimit, timeout: timeout) { [self] result in
            var listed: [FileName: ContentDigest] = [:]
            switch result {
            case .success(let body):
                listed = DigestChecks.parseSums(String(decoding: body, as: UTF8.self), fallbackName: fallbackName)
            case .failure(let error):
                logger.warning("cannot read \(Redaction.redact(url)) for the digests it lists: \(error.userMessage)")
            }
            let waiting = digests.sums.withLock { files -> [@Sendable ([FileName: ContentDigest]) -> Void] in
                guard case .loading(let waiting)? = files[url] else { return [] }
                // A read one is kept; a failed one answers "none listed" for a minute, then is tried again.
                files[url] = result.isSuccess ? .loaded(listed) : .failed(MonotonicClock.seconds())
                return waiting
            }
            for resume in waiting { resume(listed) }
        }
    }

    /// What status and `user.rangefs.digest` say of `item`'s check.
    func digestState(of item: CatalogItem) -> (short: String, detail: String?, failed: Bool) {
        guard let record = store.storedDigest(of: item.metadata, matchingSizeOnly: !item.validated) else {
            return ("unverified", nil, false)
        }
        let algorithm = record.expected.algorithm.rawValue
        switch record.verdict {
        case .verified:
            return ("verified \(algorithm)", "verified \(algorithm) (\(record.origin))", false)
        case .refetching:
            return ("unverified", "unverified: its \(algorithm) did not match \(record.origin); fetching it again", false)
        case .mismatch:
            return ("MISMATCH", "digest mismatch: its \(algorithm) is \(record.computed.hex), but \(record.origin) "
                    + "says \(record.expected.hex)", true)
        }
    }
}

private extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
