// A handle opened on a file without a length while it streamed (UnsizedDownload) stays a stream handle after the
// stream completed the file. The stream's descriptor is then the entry's data file (StreamFile links it as `data`),
// and a block evicted under `--cache-max-size` is a hole in it, read as zeros: on a mount, every MiB of a 64 MiB
// file read back as zeros through such a handle, with no error (issue 46). Once the stream completed, its handles
// read through the entry, as any handle does: its blocks are kept from eviction while served, and fetched again
// when evicted.

extension RangeFS {
    /// Answers a read of a stream handle through the entry its completed stream became, and returns true; false
    /// (the stream answers) while the stream runs, for a handle of an older generation, or when the entry cannot
    /// be opened.
    func readCompleted(_ download: UnsizedDownload, _ generation: Int, offset: UInt64, count: Int, pid: Int32,
                       reply: @escaping Reply) -> Bool {
        guard let size = download.completedSize, let (entry, inode) = completedEntry(of: download, generation)
        else { return false }
        let range = min(offset, size)..<min(offset + UInt64(count), size)
        if range.isEmpty {
            reply(.success(.bytes([])))
        } else {
            serve(range, of: entry, inode: inode, counted: true, pid: pid, reply: reply)
        }
        return true
    }

    /// The entry a completed stream became, for its handles of the current `generation`; nil (the stream's own
    /// file answers, as before the end) when the catalog has not taken the size yet or the entry cannot open.
    private func completedEntry(of download: UnsizedDownload, _ generation: Int) -> (CacheEntry, UInt64)? {
        guard download.generation == generation, let item = catalog.item(url: download.url),
              item.metadata.sizeKnown else { return nil }
        do {
            return (try entry(for: item), item.inode)
        } catch {
            logger.warning("cannot open the cache entry of \(item.name): \(error); reading its stream")
            return nil
        }
    }
}
