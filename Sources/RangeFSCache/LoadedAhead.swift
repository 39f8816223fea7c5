// An entry's files read for its summary are opened right after, most of the time: after a remount, the walk-ahead
// of a re-read tree asks each file's stored version (its small file opened, its tail read, its meta block decoded),
// then opens the entry to check and serve it, which read the same file again (issue 46: that second read was a
// tenth of the daemon's CPU per small file, and four system calls). So what a summary's read found is kept for the
// open that follows: at most `capacity` reads, each taken once.
//
// A kept read must never be older than the files. Only this process writes them, and only through an open entry:
// its opening forgets the URL's summary (`CacheStore.forgetSummary`) and its release remembers a new one, and both
// drop the URL's kept read here. A read that either overtook (begun before the change, ended after it) is not
// kept: every forget gets a stamp, and the URLs of the last stamps are kept to tell which a read overlapped; when
// they no longer reach back to its beginning, it is not kept either.

/// The entry reads kept for the next open, with the stamps that tell whether one is still current.
struct LoadedAhead {
    /// What a summary's read found on disk.
    struct Read {
        let loaded: EntryFiles.Loaded
        /// The digest record, when the read looked for it (only a complete file's): nil inside for none found.
        let digest: DigestRecord??
    }

    /// Reads kept at most; the oldest goes first. A walk-ahead runs some tens of files ahead of the reader.
    static let capacity = 256

    /// The kept reads, each with its number in `order`.
    private var kept: [String: (read: Read, number: Int)] = [:]
    /// URLs in the order their reads were kept, numbered from `firstNumber`; a URL kept again appears again, and
    /// only its latest mention (the number its read carries) drops it.
    private var order: [String] = []
    private var firstNumber = 0
    /// Mentions before this one are spent.
    private var head = 0
    private var stamp = 0
    /// The URLs of the latest forgets, by stamp: `forgotten[i]` has stamp `firstForgotten + i`.
    private var forgotten: [String] = []
    private var firstForgotten = 1

    /// The stamp a read that begins now hands to `keep`.
    var current: Int { stamp }

    /// `url`'s entry may have changed on disk (it opens, or it was released): its kept read goes, and reads of it
    /// under way are not kept.
    mutating func forget(_ url: String) {
        kept[url] = nil
        stamp += 1
        forgotten.append(url)
        if forgotten.count >= 2 * Self.capacity {
            forgotten.removeFirst(Self.capacity)
            firstForgotten += Self.capacity
        }
    }

    /// Keeps `read` of `url`, begun at stamp `since`, unless a forget of `url` came since, or may have (the log no
    /// longer reaches back to it). Returns whether it was kept.
    @discardableResult
    mutating func keep(_ read: Read, of url: String, since: Int) -> Bool {
        if overtaken(url, since: since) { return false }
        kept[url] = (read, firstNumber + order.count)
        order.append(url)
        while kept.count > Self.capacity, head < order.count {
            let oldest = order[head]
            if kept[oldest]?.number == firstNumber + head { kept[oldest] = nil }
            head += 1
        }
        // Mentions before `head` are spent, and those of reads taken or kept again are outdated: both are dropped
        // in bulk, so that a keep costs O(1) on average.
        if head >= Self.capacity {
            order.removeFirst(head)
            firstNumber += head
            head = 0
        }
        if order.count - head > 4 * Self.capacity {
            let live = order[head...].enumerated().filter { kept[$0.element]?.number == firstNumber + head + $0.offset }
            firstNumber += order.count
            order = []
            head = 0
            for (_, url) in live {
                kept[url]?.number = firstNumber + order.count
                order.append(url)
            }
        }
        return true
    }

    /// Whether a forget of `url` came since stamp `since`, or may have (the log no longer reaches back to it): a
    /// read of its files begun then may be older than they are.
    func overtaken(_ url: String, since: Int) -> Bool {
        guard since != stamp else { return false }
        guard since + 1 >= firstForgotten else { return true }
        return forgotten[(since + 1 - firstForgotten)...].contains(url)
    }

    /// Takes the kept read of `url`, if there is one: once.
    mutating func take(_ url: String) -> Read? {
        kept.removeValue(forKey: url)?.read
    }

    /// How many reads are kept.
    var count: Int { kept.count }

    /// How many mentions of kept reads the order holds, spent ones aside (for tests: it stays bounded).
    var mentions: Int { order.count - head }
}
