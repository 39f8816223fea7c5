// What the store and the scheduler report about entries (EntryEvent.swift), taken in order on the file system's
// own thread: they were made before it and hold nothing of it (issue 48).
import RangeFSCache

extension RangeFS {
    /// Acts on one report; each only hands work on, so the next report never waits for a probe or a check.
    func handle(_ event: EntryEvent) {
        switch event {
        case .completed(let entry):
            checkDigest(of: entry, again: true)
        case .reshaped(let old, let new, let lent):
            entryReshaped(old, into: new, lent: lent)
        case .remoteChanged(let changed):
            if let entry = changed as? CacheEntry { revalidator.revalidate(entry, knownChanged: true) }
        }
    }
}
