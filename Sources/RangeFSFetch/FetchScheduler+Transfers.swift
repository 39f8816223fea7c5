// The scheduler as the owner of its transfers (TransferOwner.swift): what a BlockSink tells it while it runs and
// when it ends.
import RangeFSCache

extension FetchScheduler: TransferOwner {
    func retry(_ sink: BlockSink, after delay: Duration) {
        sink.tally.drain(into: metrics)
        after(delay) { sink.startAttempt() }
    }

    func remoteChanged(_ entry: any BlockStore) {
        events.reports?.send(.remoteChanged(entry))
    }

    func isWanted(_ sink: BlockSink) -> Bool {
        let entry = sink.blockStore
        return entry.use.hasLiveUse || isFilling(entry)
    }

    /// Says that a server's ETags are not used (once: the cache keeps the servers found to rotate them).
    package func etagsRotate(at origin: String) {
        logger.warning("\(origin) sends another ETag on each answer for the same file (length and Last-Modified unchanged): its ETags are not used as validators; changes are told by length and Last-Modified")
    }

    /// The stream still counts as the old entry's transfer until it ends (`countedStore`); a fill of the old
    /// entry is one of the new.
    func moved(_ sink: BlockSink, from old: any BlockStore, to new: any BlockStore) {
        if isFilling(old) { fill(new, url: sink.url) }
    }

    func finished(_ sink: BlockSink, outcome: TransferOutcome) {
        transferEnded(sink, outcome: outcome)
    }
}
