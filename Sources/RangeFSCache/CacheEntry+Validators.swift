// Which version of the remote file this entry holds, and how an answer is matched against it. Normally the ETag
// tells (else Last-Modified); for a server found to rotate its ETags (RotatingETags.swift) the entry retires its
// ETag and length and Last-Modified tell from then on. The entry also keeps when its server last answered with
// this version (ListedDate.swift).

import Dispatch

extension CacheEntry {
    /// The version this entry holds, as its header records it, without an ETag once that was retired, and with
    /// the latest moment the server answered with it.
    package var remoteMetadata: RemoteMetadata {
        var metadata = header.remoteMetadata
        if etagRetired.load(ordering: .relaxed) { metadata.etag = "" }
        metadata.answeredAt = answeredAt
        return metadata
    }

    /// When the server last answered with this version, as far as this entry knows (ListedDate.swift).
    var answeredAt: Int64? {
        let confirmed = confirmedAt.load(ordering: .relaxed)
        return confirmed > 0 ? confirmed : header.answeredAt
    }

    /// How much later than the kept moment an answer must be for the header to be written again: one write per
    /// entry per minute of the server's clock at most, which is what a listing's date to the minute can use.
    static let confirmationStep: Int64 = 60

    /// An answer of the server at `moment` (its Date; nil if it sent none) described this version. Where the
    /// header keeps no moment (it was written without one, as every header before version 2), or one at least
    /// `confirmationStep` older, the moment is taken at once and written to the header in the background (the
    /// same generation: its slots stay valid). A listing can then be this file's check at the next mount
    /// (ListedDate.swift): a cache made before headers kept the moment, or a file cached within the minute it
    /// changed in, is checked once more, not at every mount.
    package func noteAnswered(at moment: Int64?) {
        guard let moment, moment > 0 else { return }
        var seen = confirmedAt.load(ordering: .relaxed)
        while true {
            let known = seen > 0 ? seen : header.answeredAt ?? 0
            guard known == 0 || moment >= known + Self.confirmationStep else { return }
            let (exchanged, found) = confirmedAt.compareExchange(expected: seen, desired: moment, ordering: .relaxed)
            if exchanged { break }
            seen = found
        }
        rewriteHeader(saying: "when its server last answered")
    }

    /// What to send as If-Range for this entry's version of the file.
    var validator: String? { remoteMetadata.ifRangeValidator }

    /// Whether this entry was made for the content `metadata` describes: the same ETag (or, without one on either
    /// side, the same Last-Modified) and length; or only another ETag from a server known to rotate them.
    package func matches(_ metadata: RemoteMetadata) -> Bool {
        // An entry of unknown size covers a capacity: it is never the entry of a size. An entry of a size is the
        // one of a file without a length whose stream ended (CacheStore+SettledSize.swift), if its validators say so.
        guard header.sizeKnown == metadata.sizeKnown || header.sizeKnown else { return false }
        let mine = remoteMetadata
        if mine.describesSameContent(as: metadata) { return true }
        guard mine.etagRotated(to: metadata), ledger.rotatingETags.contains(header.url) else { return false }
        retireETag()
        return true
    }

    /// Judges an answer that differs from this version only by its ETag (`RemoteMetadata.etagRotated`).
    package func judgeETag(_ etag: String) -> ETagVerdict {
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
    package func noteOwnAnswer() {
        state.withLock { state in if state.otherETag != nil { state.ownAnswerSinceOther = true } }
    }

    /// Stops using the ETag as this version's validator (its server rotates them): in memory at once, in the header
    /// (in a new slot: the header record never changes) on a background queue, under the ledger's `opening` lock so
    /// that it never replaces the header of a newer version, and never after this entry went stale or its store
    /// closed (another store of the same cache may own the file by then). Records the
    /// server as one that rotates; returns its origin the first time, to say so once.
    @discardableResult
    package func retireETag() -> String? {
        guard !header.etag.isEmpty, !etagRetired.exchange(true, ordering: .relaxed) else { return nil }
        rewriteHeader(saying: "that its ETag is not used")
        return ledger.rotatingETags.insert(header.url)
    }

    /// Records what this entry now knows of its version (its ETag retired or not, its latest moment) in a new
    /// slot of its meta block (the header record never changes: MetaBlock.swift): a commit of this entry alone, on
    /// a background queue, under the ledger's `opening` lock, never after this entry went stale or its store closed
    /// (another store of the same cache may own the file by then). Each commit takes what is known when it runs, so
    /// two of them in either order leave the latest on disk.
    private func rewriteHeader(saying what: String) {
        DispatchQueue.global(qos: .utility).async { [self] in
            ledger.opening(header.url).withLock {
                guard !isStale, !ledger.detached.load(ordering: .relaxed) else { return }
                state.withLock { $0.changedSinceCommit = true }
                do {
                    try commit()
                } catch {
                    // Kept in memory, and by the next group commit: the next run may find the old slot, and judge
                    // it again.
                    logger.warning("cannot record in \(directory) \(what): \(error)")
                }
            }
        }
    }
}
