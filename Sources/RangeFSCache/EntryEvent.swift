// What the cache and the fetching below the file system report about an entry (issue 48: nothing points back up).
// The store and the scheduler are made before the file system and are given, at their birth, the queue these are
// sent into (EventQueue.swift); the file system drains it on a thread of its own. A report only hands work on, so
// it can wait in the queue: a digest check after a completion, a probe after a change (a READ that found the change
// starts or joins that probe itself before it answers ESTALE: Revalidator.answerStale), the move of an entry's
// handles to its reshaped successor (reads of a reshaped entry go through the file's current entry meanwhile, and
// the catalog learns a settled size in the read that finds it: RangeFS+UnknownSize.swift).

/// A report about a cached entry, from the store or the scheduler to the file system.
package enum EntryEvent: Sendable {
    /// A commit made the entry's whole file durable: it is checked against its digest.
    case completed(CacheEntry)
    /// An entry of unknown size was settled at the size its stream found, or grown past its capacity
    /// (CacheStore+SettledSize.swift): the old entry is stale, the new one holds its blocks.
    /// `lent`: the uses of the handles open on `old` that `new` holds for them until they move (EntryUse.lendHandles).
    case reshaped(old: CacheEntry, new: CacheEntry, lent: Int)
    /// A fetch found that the remote file of the entry changed (its waiting readers were failed already).
    case remoteChanged(any BlockStore)
}
