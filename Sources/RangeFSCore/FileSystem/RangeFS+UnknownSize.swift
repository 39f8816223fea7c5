// A file whose server sends no length has no size until its body ends. The block pipeline streams it into an entry
// of unknown size, which the store reshapes when the body ends or outgrows the entry's capacity
// (CacheStore+SettledSize.swift); this is the file system's side of that: once the size is known, the catalog
// takes it and the kernel drops the attributes it holds (a size of 0, or of the bytes streamed so far).

extension RangeFS {
    /// `old`, an entry of unknown size, was reshaped into `new`: settled at its size (the file learns it), or grown
    /// (its size is still unknown: nothing changes for the kernel).
    func entryReshaped(_ old: CacheEntry, into new: CacheEntry) {
        guard new.header.sizeKnown else { return }
        learnSize(new.remoteMetadata)
    }

    /// The size of the file at `metadata.url` is known from now on: each of its catalog items takes it, the
    /// kernel is told first (as a probe that found another size does, so that an open in between waits for the
    /// notice), and the file counts as checked against its server now.
    func learnSize(_ metadata: RemoteMetadata) {
        for item in catalog.items(url: metadata.url) {
            var known = metadata
            known.suggestedName = item.metadata.suggestedName
            kernel.attributesChanged(of: item.inode)
            catalog.update(inode: item.inode, metadata: known)
        }
        revalidator.markValidated(metadata.url)
    }
}
