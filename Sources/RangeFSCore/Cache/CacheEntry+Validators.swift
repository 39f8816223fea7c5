// Which version of the remote file this entry holds, and how an answer is matched against it. Normally the ETag
// tells (else Last-Modified); for a server found to rotate its ETags (RotatingETags.swift) the entry retires its
// ETag and length and Last-Modified tell from then on.

import Dispatch

extension CacheEntry {
    /// The version this entry holds, as its header records it, without an ETag once that was retired.
    var remoteMetadata: RemoteMetadata {
        var metadata = header.remoteMetadata
        if etagRetired.load(ordering: .relaxed) { metadata.etag = "" }
        return metadata
    }

    /// What to send as If-Range for this entry's version of the file.
    var validator: String? { remoteMetadata.ifRangeValidator }

    /// Whether this entry was made for the content `metadata` describes: the same ETag (or, without one on either
    /// side, the same Last-Modified) and length; or only another ETag from a server known to rotate them.
    func matches(_ metadata: RemoteMetadata) -> Bool {
        let mine = remoteMetadata
        if mine.describesSameContent(as: metadata) { return true }
        guard mine.etagRotated(to: metadata), ledger.rotatingETags.contains(header.url) else { return false }
        retireETag()
        return true
    }

    /// Judges an answer that differs from this version only by its ETag (`RemoteMetadata.etagRotated`).
    func judgeETag(_ etag: String) -> ETagVerdict {
        if ledger.rotatingETags.contains(header.url) { return .rotates }
        return state.withLock { state in
            guard let other = state.otherETag else {
                state.otherETag = etag
                state.ownAnswerSinceOther = false
                return .askAgain
            }
            return other != etag || state.ownAnswerSinceOther ? .rotates : .changed
        }
    }

    /// An answer for this version's own validator arrived (a 206 to its If-Range): after another ETag was seen,
    /// that is a server answering with two ETags for the same file.
    func noteOwnAnswer() {
        state.withLock { state in if state.otherETag != nil { state.ownAnswerSinceOther = true } }
    }

    /// Stops using the ETag as this version's validator (its server rotates them): in memory at once, in the header
    /// (the same generation, so the bitmap stays valid) on a background queue, under the ledger's `opening` lock so
    /// that it never replaces the header of a newer version, and never after this entry went stale or its store
    /// closed (another store of the same cache may own the file by then). Records the
    /// server as one that rotates; returns its origin the first time, to say so once.
    @discardableResult
    func retireETag() -> String? {
        guard !header.etag.isEmpty, !etagRetired.exchange(true, ordering: .relaxed) else { return nil }
        var header = self.header
        header.etag = ""
        let retired = header.encoded()
        let path = directory + "/header"
        let url = header.url
        DispatchQueue.global(qos: .utility).async { [self] in
            ledger.opening(url).withLock {
                guard !isStale, !ledger.detached.load(ordering: .relaxed) else { return }
                do {
                    try FileSystemCalls.replaceAtomically(path, with: retired)
                } catch {
                    // Kept in memory: the next run finds the old ETag, and judges it again.
                    logger.warning("cannot record in \(path) that its ETag is not used: \(error)")
                }
            }
        }
        return ledger.rotatingETags.insert(header.url)
    }
}
