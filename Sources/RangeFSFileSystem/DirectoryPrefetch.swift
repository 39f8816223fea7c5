// Readahead one level up (DESIGN.md §5, issue 36): `cp -r`, `tar`, `rsync`, `find | xargs cat` and data loaders
// open a listed directory's files in listing order, and each open of a cold file costs a round trip (its probe)
// that nothing hid. Here the opens of each directory are watched, and once a reader is seen going through it in
// order, the next files are fetched ahead of it, in parallel: each with the probe an open makes
// (`DirectoryService.whenValidated`, one GET for its validators and first bytes: all of a file of up to 256 KiB),
// so when the reader opens it, it is validated and a small file's blocks are cached: its open and reads send no
// request. A larger file gets its first block only, the part a reader waits for first; readahead takes over from
// there.
//
// The detector follows several readers of one directory at once, as a readahead follows several sequential
// streams of one file: `xargs -P 8 -n 20 cat` has 8 readers 20 files apart, each in order, and a directory of
// one `cp -r` has one. Per directory, up to `readers` cursors, each the last file one reader opened, with its own
// streak, window and files fetched ahead. An open continues the cursor nearest behind it when it is one of the
// `tolerance` files after that cursor's file, and moves it; an open of one of the `tolerance` files before a
// cursor (readers splitting a directory, `xargs -P` with `-n 1`) changes nothing; any other open starts a cursor of
// its own, and the cursor used longest ago is forgotten when there are `readers` already.
// Prefetching starts after `streakToStart` opens in order, so a reader that jumps around triggers nothing. The
// only cursor of a directory (one reader) is as tolerant as that says; once a directory has several, random opens
// would often land a few files after one of them, so a cursor not yet fetching needs one more open in order, each
// within `startTolerance` files of the last (a reader taking every other file still counts): one reader that
// jumps around keeps triggering nothing, however many cursors its jumps leave.
//
// The window of a cursor, in files ahead of its file, works as TCP's slow start does: it starts at `firstWindow`,
// grows by one for every file fetched ahead that a reader then opens (doubling per round), and halves for each one
// the reader went past without opening. It never exceeds the depth the measured link asks for (LinkEstimate: its
// bandwidth × round trip in files, 2...64); no file is fetched ahead for two cursors, and the whole mount never has
// more than `bytesAhead` fetched ahead
// and not yet opened, nor more than `inFlight` fetches running: the background connections (`--connections`, the
// per-host cap by default) less two, so a reader's own open never queues behind them (reads have their own
// connections: FetchScheduler's demand fetcher).
//
// Locks: `state` is taken before the catalog's (siblings are found under it) and the link estimate's; no fetch
// starts under it.

import Dispatch
import RangeFSCatalog
import RangeFSFetch
import RangeFSSystem

/// Fetches the next files of a directory ahead of readers that open its files in listing order.
final class DirectoryPrefetch: Sendable {
    /// The bounds of prefetching; the defaults are the mount's.
    struct Limits: Sendable, Equatable {
        /// Bytes fetched ahead and not yet opened, for the whole mount.
        var bytesAhead = 64 << 20
        /// Fetches running at once, for the whole mount.
        var inFlight = 14
        /// Connections the depth assumes (`--connections`, as many as `--connections-per-host` by default).
        var connections = 16
        /// The window a stream starts with, and the range of the depth the link sets.
        var firstWindow = 4
        var depth = 2...64
        /// How far (in files) an open may be from a cursor and still count as in order.
        var tolerance = 8
        /// Opens in order before anything is fetched ahead.
        var streakToStart = 2
        /// Readers followed at once in one directory (cursors): more than `xargs -P 8` runs.
        var readers = 16
        /// Once a directory has several cursors, how far an open may be from a cursor not yet fetching ahead and
        /// still count as in order (it then needs `streakToStart + 1` such opens).
        var startTolerance = 2
        /// Directories watched at once; the one used longest ago is forgotten first.
        var streams = 64
        /// How long a directory nobody opens a file of keeps what it fetched ahead booked against `bytesAhead`: a
        /// copy stopped midway, or a loader that reads the first files of each directory only, must not leave the
        /// mount's budget spent for good.
        var idleTime: Duration = .seconds(10)
    }

    /// Fetches `file` ahead (its open's probe) and calls `done` once that is over, however it went.
    typealias Fetch = @Sendable (_ file: CatalogItem, _ done: @escaping @Sendable () -> Void) -> Void

    private struct Ahead {
        let name: FileName
        let bytes: Int
        /// In-order opens since the cursor went past it; beyond `tolerance`, the guess was wrong.
        var passedBy = 0
    }

    /// One reader's way through a directory.
    private struct Cursor {
        /// The last file this reader opened (the furthest, when opens come a little out of order).
        var position: CatalogItem
        var streak = 0
        var window: Int
        /// Files fetched (or being fetched) ahead of this reader and not opened yet.
        var ahead: [UInt64: Ahead] = [:]
        /// The last file fetching ahead considered: the next one starts after it.
        var considered: CatalogItem?
        var lastUse: UInt64
        /// Whether it has fetched ahead: from then on it is in order within `tolerance`.
        var fetching = false
    }

    /// One directory being read.
    private struct Stream {
        var cursors: [Cursor]
        /// The origin of the directory's files (`LinkEstimate.origin(of:)`), the key of their link: that of the
        /// first one opened. A listing that links files on other hosts (rare) has its depth sized by that one's.
        let origin: String
        /// Bytes a file of this directory is fetched ahead for, smoothed.
        var typicalBytes: Int
        var lastUse: UInt64
        /// When a reader last opened a file of it: a stream left for `Limits.idleTime` gives back its budget.
        var seenAt = ContinuousClock.now
    }

    private struct State {
        var streams: [UInt64: Stream] = [:]
        var bytesAhead = 0
        var inFlight = 0
        var clock: UInt64 = 0
        /// Files fetched ahead in all, and those opened afterwards (for `status` and tests).
        var fetched = 0
        var used = 0
    }

    private let state = LockedBox(State())
    private let catalog: Catalog
    private let link: LinkEstimate
    let limits: Limits
    /// How many bytes one fetch ahead brings at most (the open's probe size), and what it brings of a larger file
    /// (its first block: `FirstBytes.probeLength`).
    private let probeBytes: Int
    private let probeBlockBytes: Int
    private let fetch: Fetch

    init(catalog: Catalog, link: LinkEstimate, limits: Limits, probeBytes: Int,
         probeBlockBytes: Int = FileSystemSettings().blockSize, fetch: @escaping Fetch) {
        self.catalog = catalog
        self.link = link
        self.limits = limits
        self.probeBytes = max(1, probeBytes)
        self.probeBlockBytes = probeBlockBytes
        self.fetch = fetch
    }

    /// Files fetched ahead so far, and how many of them a reader then opened.
    var counts: (fetched: Int, used: Int) {
        state.withLock { ($0.fetched, $0.used) }
    }

    /// A reader opens `item`: updates its directory's cursors, and fetches ahead what that calls for.
    func opened(_ item: CatalogItem) {
        guard item.listed else { return }
        let toFetch = state.withLock { state -> [CatalogItem] in
            state.clock += 1
            guard var stream = state.streams.removeValue(forKey: item.parent) else {
                makeRoom(&state)
                let cursor = Cursor(position: item, window: limits.firstWindow, lastUse: state.clock)
                state.streams[item.parent] = Stream(cursors: [cursor], origin: LinkEstimate.origin(of: item.metadata.url),
                                                    typicalBytes: cost(of: item), lastUse: state.clock)
                return []
            }
            stream.lastUse = state.clock
            stream.seenAt = .now
            stream.typicalBytes += (cost(of: item) - stream.typicalBytes) / 8
            defer { state.streams[item.parent] = stream }
            // A guess used: the cursor that made it widens its window, whoever opened it.
            let owner = stream.cursors.firstIndex { $0.ahead[item.inode] != nil }
            if let owner, let hit = stream.cursors[owner].ahead.removeValue(forKey: item.inode) {
                state.bytesAhead -= hit.bytes
                state.used += 1
                stream.cursors[owner].window = min(stream.cursors[owner].window + 1, limits.depth.upperBound)
            }
            let name = FileName(item.name)
            // The only cursor's guess used is that cursor going on (`continued(by:)` could name no other): one
            // reader's opens ask nothing more of the catalog than they did before there were several cursors.
            let only = stream.cursors.count == 1 ? owner : nil
            guard let index = only ?? continued(by: item, in: stream) ?? owner else {
                if !stream.cursors.contains(where: { $0.position.inode == item.inode || follows($0.position, item) }) {
                    // Not a little behind any reader either: a reader of its own (one that jumped, or a new one).
                    if stream.cursors.count >= limits.readers, let oldest = stream.cursors.indices
                        .min(by: { stream.cursors[$0].lastUse < stream.cursors[$1].lastUse }) {
                        for dropped in stream.cursors.remove(at: oldest).ahead.values { state.bytesAhead -= dropped.bytes }
                    }
                    stream.cursors.append(Cursor(position: item, window: limits.firstWindow, lastUse: state.clock))
                }
                return []
            }
            stream.cursors[index].lastUse = state.clock
            if name > FileName(stream.cursors[index].position.name) {
                stream.cursors[index].streak += 1
                advance(&stream.cursors[index], to: item, state: &state)
            }
            return issue(&stream, cursor: index, state: &state)
        }
        start(toFetch)
    }

    /// The cursor of `stream` that an open of `item` continues: the nearest one before it, if `item` is one of the
    /// files that follow it closely enough (see the top of this file).
    private func continued(by item: CatalogItem, in stream: Stream) -> Int? {
        let name = FileName(item.name)
        var nearest: Int?
        for (index, cursor) in stream.cursors.enumerated() where FileName(cursor.position.name) <= name {
            if let best = nearest, FileName(stream.cursors[best].position.name) >= FileName(cursor.position.name) {
                continue
            }
            nearest = index
        }
        // A file opened again (a cursor is on it) continues nothing.
        guard let nearest, stream.cursors[nearest].position.inode != item.inode else { return nil }
        let cursor = stream.cursors[nearest]
        let strict = stream.cursors.count > 1 && !cursor.fetching
        return follows(item, cursor.position, within: strict ? limits.startTolerance : limits.tolerance) ? nearest : nil
    }

    /// Whether `later` is one of the `within` (by default `tolerance`) files that follow `earlier` in its
    /// directory's order.
    private func follows(_ later: CatalogItem, _ earlier: CatalogItem, within: Int? = nil) -> Bool {
        guard later.parent == earlier.parent, FileName(later.name) > FileName(earlier.name) else { return false }
        return catalog.follows(later, earlier, within: within ?? limits.tolerance)
    }

    /// Moves `cursor` to `item`; a file fetched ahead that the cursor left `tolerance` opens behind was a wrong
    /// guess: the window halves.
    private func advance(_ cursor: inout Cursor, to item: CatalogItem, state: inout State) {
        cursor.position = item
        let name = FileName(item.name)
        for (inode, var ahead) in cursor.ahead where ahead.name < name {
            ahead.passedBy += 1
            if ahead.passedBy > limits.tolerance {
                cursor.ahead[inode] = nil
                state.bytesAhead -= ahead.bytes
                cursor.window = max(limits.firstWindow, cursor.window / 2)
            } else {
                cursor.ahead[inode] = ahead
            }
        }
    }

    /// The files to fetch now for cursor `index` of `stream`: those after the last one it considered, while its
    /// window, the depth, the byte budget and the fetches in flight allow, and no other cursor has them.
    private func issue(_ stream: inout Stream, cursor index: Int, state: inout State) -> [CatalogItem] {
        let streakNeeded = limits.streakToStart + (stream.cursors.count > 1 ? 1 : 0)
        guard stream.cursors[index].fetching || stream.cursors[index].streak >= streakNeeded else { return [] }
        stream.cursors[index].fetching = true
        let depth = link.depth(forOrigin: stream.origin, typicalBytes: stream.typicalBytes,
                               connections: limits.connections, bounds: limits.depth)
        let others: Set<UInt64> = stream.cursors.count == 1 ? []
            : Set(stream.cursors.indices.filter { $0 != index }.flatMap { stream.cursors[$0].ahead.keys })
        return fill(&stream.cursors[index], depth: depth, others: others, state: &state)
    }

    /// `issue`'s files for `cursor`, changed where it is: a copy of it would copy its files ahead at the first one
    /// added (a dictionary copied at every fetch ahead).
    private func fill(_ cursor: inout Cursor, depth: Int, others: Set<UInt64>, state: inout State) -> [CatalogItem] {
        let room = min(min(cursor.window, depth) - cursor.ahead.count, limits.inFlight - state.inFlight)
        guard room > 0 else { return [] }
        var start = cursor.position
        if let considered = cursor.considered, FileName(considered.name) > FileName(start.name) { start = considered }
        let candidates = catalog.siblings(after: start, limit: room, scan: room * 4 + limits.tolerance) { file in
            file.listed && !file.validated && !others.contains(file.inode)
        }
        var chosen: [CatalogItem] = []
        for file in candidates {
            let bytes = cost(of: file)
            if state.bytesAhead + bytes > limits.bytesAhead { reclaimIdle(&state) }
            guard state.bytesAhead + bytes <= limits.bytesAhead else { break }
            state.bytesAhead += bytes
            state.inFlight += 1
            state.fetched += 1
            cursor.ahead[file.inode] = Ahead(name: FileName(file.name), bytes: bytes)
            cursor.considered = file
            chosen.append(file)
        }
        return chosen
    }

    private func start(_ files: [CatalogItem]) {
        for file in files {
            fetch(file) { [weak self] in self?.finished(file) }
        }
    }

    /// A fetch ahead ended: its slot goes to the readers of its directory, the one seen last first.
    private func finished(_ file: CatalogItem) {
        let next = state.withLock { state -> [CatalogItem] in
            state.inFlight -= 1
            guard var stream = state.streams.removeValue(forKey: file.parent) else { return [] }
            defer { state.streams[file.parent] = stream }
            var chosen: [CatalogItem] = []
            for index in stream.cursors.indices.sorted(by: { stream.cursors[$0].lastUse > stream.cursors[$1].lastUse })
            where state.inFlight < limits.inFlight {
                chosen += issue(&stream, cursor: index, state: &state)
            }
            return chosen
        }
        start(next)
    }

    /// What fetching `file` ahead brings at most: its first bytes, or all of it if it is smaller.
    private func cost(of file: CatalogItem) -> Int {
        guard file.metadata.sizeKnown else { return probeBytes }
        let asked = FirstBytes.probeLength(size: file.metadata.size, limit: probeBytes, block: probeBlockBytes)
        return Int(min(UInt64(asked), max(1, file.metadata.size)))
    }

    /// Streams (other than the one being served, which is out of `state` meanwhile) that no reader came back to
    /// for `Limits.idleTime` stop, and give back the bytes they fetched ahead that nobody opened.
    private func reclaimIdle(_ state: inout State) {
        let now = ContinuousClock.now
        for (key, var stream) in state.streams where now - stream.seenAt >= limits.idleTime {
            for index in stream.cursors.indices where !stream.cursors[index].ahead.isEmpty {
                for dropped in stream.cursors[index].ahead.values { state.bytesAhead -= dropped.bytes }
                stream.cursors[index].ahead = [:]
                // A fetch of it that ends now starts no more.
                (stream.cursors[index].streak, stream.cursors[index].fetching) = (0, false)
            }
            state.streams[key] = stream
        }
    }

    /// Forgets the stream used longest ago when `streams` are watched already.
    private func makeRoom(_ state: inout State) {
        guard state.streams.count >= limits.streams,
              let oldest = state.streams.min(by: { $0.value.lastUse < $1.value.lastUse })?.key,
              let stream = state.streams.removeValue(forKey: oldest)
        else { return }
        for dropped in stream.cursors.flatMap(\.ahead.values) { state.bytesAhead -= dropped.bytes }
    }
}

extension RangeFS {
    /// The prefetcher of this mount's directories (nil with `--dir-prefetch off`): a file is fetched ahead with the
    /// probe its open would make, so the open finds it validated and its first blocks cached; a file cached whole
    /// by an earlier run has its entry opened and checked (`EntryOpener.prepareEntry`), so the open finds that done too.
    static func makeDirectoryPrefetch(catalog: Catalog, directories: DirectoryService, link: LinkEstimate,
                                      settings: FileSystemSettings, connections: Int,
                                      opener: EntryOpener) -> DirectoryPrefetch? {
        guard settings.directoryPrefetch else { return nil }
        var limits = DirectoryPrefetch.Limits()
        limits.connections = max(1, connections)
        limits.inFlight = max(1, connections - 2)
        // The fetches start on a queue of their own, not in the open that called for them: a file cached by an
        // earlier run is validated from its entry on disk, which an open waited for, several files' worth, before
        // it answered (a fifth of the daemon's time re-reading a cached tree after a remount). There, they read
        // the next files' entries beside the reader. The entries of files cached whole are then prepared several
        // at once (no more than the fetches ahead in flight), so that the disk's reads overlap and keep ahead of a
        // reader that waits for one read at a time.
        let starts = DispatchQueue(label: "rangefs.directory-prefetch", qos: .utility)
        let weakOpener = WeakReference(opener)
        let prepares = DispatchQueue(label: "rangefs.directory-prefetch.prepare", qos: .utility, attributes: .concurrent)
        return DirectoryPrefetch(catalog: catalog, link: link, limits: limits,
                                 probeBytes: settings.openProbeBytes,
                                 probeBlockBytes: settings.blockSize) { [weak directories] file, done in
            guard let directories else { return done() }
            // The prefetch's queued work holds neither the directories nor the opener (and through it the store):
            // a file system that went lets its cache (and the cache's lock) go once its probes in flight end, not
            // after every fetch ahead it queued.
            starts.async { [weak directories] in
                guard let directories else { return done() }
                directories.fetchAhead(file) {
                    prepares.async {
                        weakOpener.object?.prepareEntry(of: file)
                        done()
                    }
                }
            }
        }
    }
}

/// A reference that does not keep its object alive, for work queued by a part that may go first.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    weak let object: Object?

    init(_ object: Object) {
        self.object = object
    }
}
