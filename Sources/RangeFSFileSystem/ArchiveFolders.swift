// The archives a mount with `--archives` shows as folders: for each, its index once built (an ArchiveTree), the
// readers waiting for it meanwhile, or why it failed; and the members open for reading. Indexes are built on the
// first lookup or readdir of the folder, never at mount (RangeFS+Archives.swift builds them); this only keeps the
// state, under one lock that nothing else is taken under.

import Dispatch
import RangeFSArchives
import RangeFSCache
import RangeFSSystem
import Synchronization

/// The archives shown as folders and their open members.
package final class ArchiveFolders: Sendable {
    /// Set in every handle of an open member (OpenHandles' handles count up from 1 and never reach it).
    static let handleBit: UInt64 = 1 << 63

    typealias Waiter = @Sendable (Result<ArchiveTree, FileSystemError>) -> Void

    /// Where one archive's index stands.
    enum Phase {
        case building([Waiter])
        case ready(ArchiveTree)
        case failed(FileSystemError)
    }

    /// One archive: the catalog's file it is, the slot its members' inodes carry, the version indexed.
    struct Archive {
        let item: UInt64
        let slot: UInt32
        var version: String
        var phase: Phase
        /// The source being read while the index is built, for its progress.
        var source: CacheEntrySource?
    }

    /// A member open for reading. Its reader keeps a stream (a deflated member inflated so far), so its reads run
    /// one at a time, on its own queue.
    final class OpenMember: @unchecked Sendable {
        // @unchecked Sendable: `reader` and `fault` are used only on `queue`; the rest never changes.
        let reader: ArchiveMemberReader
        let entry: CacheEntry
        let queue = DispatchQueue(label: "rangefs.archive-member")
        /// The fault a read of this handle found (a CRC-32 that does not match, say): every later read answers
        /// it too. The kernel retries a failed readahead with a read of its own, which the reader, no longer
        /// reading in order from the start, could not check again.
        var fault: ArchiveError?
        /// A member stored as one range of the archive (tar, ISO): the archive's handle it is read through, and
        /// where its bytes start and end in the archive.
        let view: (handle: UInt64, start: UInt64, end: UInt64)?

        init(reader: ArchiveMemberReader, entry: CacheEntry, view: (handle: UInt64, start: UInt64, end: UInt64)?) {
            self.reader = reader
            self.entry = entry
            self.view = view
        }
    }

    private struct State {
        var archives: [UInt64: Archive] = [:]
        var itemOfSlot: [UInt32: UInt64] = [:]
        var nextSlot: UInt32 = 1
        var open: [UInt64: OpenMember] = [:]
        var nextHandle: UInt64 = 1
    }

    private let state = LockedBox(State())

    /// The URLs shown as archives' folders without `--archives`: a list-file line or a `rangefs add` ending in
    /// `archives`, kept in the saved set so a remount shows them the same way. A directory URL marks the archives
    /// listed under it. Apart from `state`: every getattr of a mount with marks reads them.
    private let marked = LockedBox<Set<String>>([])
    /// Whether `marked` holds any URL: a mount without marks answers its getattrs without taking the lock.
    private let hasMarks = Atomic<Bool>(false)

    /// The archive format a file's name says, if it is one.
    static func format(ofName name: String) -> ArchiveIndex.Format? {
        let lower = name.lowercased()
        if lower.hasSuffix(".zip") { return .zip }
        if lower.hasSuffix(".tar") { return .tar }
        if lower.hasSuffix(".tar.gz") || lower.hasSuffix(".tgz") { return .tarGzip }
        if lower.hasSuffix(".iso") { return .iso9660 }
        return nil
    }

    // MARK: Marked URLs

    /// Shows the archive at `url` (or, for a directory URL, the archives listed under it) as a folder.
    func mark(_ url: String) {
        marked.withLock { marked in
            marked.insert(url)
            hasMarks.store(true, ordering: .releasing)
        }
    }

    /// Stops showing `url` as marked (`rangefs rm`, or an add that failed).
    func unmark(_ url: String) {
        marked.withLock { marked in
            marked.remove(url)
            hasMarks.store(!marked.isEmpty, ordering: .releasing)
        }
    }

    /// Whether `url` itself was marked, with or without the `/` a directory URL ends in (the user may give it
    /// without; its server's redirect adds it): what the saved set keeps.
    func isMarked(_ url: String) -> Bool {
        guard hasMarks.load(ordering: .acquiring) else { return false }
        let bare = url.hasSuffix("/") ? String(url.dropLast()) : url
        return marked.withLock { $0.contains(url) || $0.contains(bare) || $0.contains(bare + "/") }
    }

    /// Whether the file at `url` shows as a folder through a mark: its own, or that of a directory URL above it.
    func coversMarked(_ url: String) -> Bool {
        guard hasMarks.load(ordering: .acquiring) else { return false }
        return marked.withLock { marked in
            marked.contains(url) || marked.contains { url.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }
        }
    }

    /// Whether any URL is marked, without a lock.
    var anyMarked: Bool { hasMarks.load(ordering: .acquiring) }

    // MARK: Indexes

    /// Calls `reply` with the tree of the archive that is catalog file `item` at version `version`, now if it is
    /// built, else once it is; `build` runs (outside the lock) when nobody is building it yet, with the new slot.
    func whenIndexed(item: UInt64, version: String, build: (UInt32) -> Void, reply: @escaping Waiter) {
        enum Next { case answer(Result<ArchiveTree, FileSystemError>), wait, build(UInt32) }
        let next = state.withLock { state -> Next in
            if let archive = state.archives[item], archive.version == version {
                switch archive.phase {
                case .ready(let tree): return .answer(.success(tree))
                case .failed(let error): return .answer(.failure(error))
                case .building(let waiters):
                    state.archives[item]!.phase = .building(waiters + [reply])
                    return .wait
                }
            }
            // Not indexed yet, or indexed for another version (the archive changed): a new slot, new inodes.
            if let old = state.archives[item] { state.itemOfSlot[old.slot] = nil }
            let slot = state.nextSlot
            state.nextSlot += 1
            state.itemOfSlot[slot] = item
            state.archives[item] = Archive(item: item, slot: slot, version: version, phase: .building([reply]))
            return .build(slot)
        }
        switch next {
        case .answer(let result): reply(result)
        case .wait: break
        case .build(let slot): build(slot)
        }
    }

    /// Records the source an index of `slot` is being read from, for its progress.
    func reading(_ source: CacheEntrySource, slot: UInt32) {
        state.withLock { state in
            guard let item = state.itemOfSlot[slot], state.archives[item]?.slot == slot else { return }
            state.archives[item]!.source = source
        }
    }

    /// The build of `slot` ended with `result` (`version`: what it indexed): its waiters are answered. A failure
    /// that may pass (`retry`: the server was unreachable) is not kept: the next lookup tries again.
    func finish(slot: UInt32, version: String, result: Result<ArchiveTree, FileSystemError>, retry: Bool) {
        let waiters = state.withLock { state -> [Waiter] in
            guard let item = state.itemOfSlot[slot], let archive = state.archives[item], archive.slot == slot,
                  case .building(let waiters) = archive.phase else { return [] }
            if retry {
                state.archives[item] = nil
                state.itemOfSlot[slot] = nil
                return waiters
            }
            switch result {
            case .success(let tree): state.archives[item]!.phase = .ready(tree)
            case .failure(let error): state.archives[item]!.phase = .failed(error)
            }
            state.archives[item]!.version = version
            state.archives[item]!.source = nil
            return waiters
        }
        for waiter in waiters { waiter(result) }
    }

    /// The tree whose members carry `slot`, and the catalog file it is, once built.
    func tree(slot: UInt32) -> (tree: ArchiveTree, item: UInt64)? {
        state.withLock { state in
            guard let item = state.itemOfSlot[slot], let archive = state.archives[item], archive.slot == slot,
                  case .ready(let tree) = archive.phase else { return nil }
            return (tree, item)
        }
    }

    /// How the index of catalog file `item` stands, for its `user.rangefs.archive` attribute.
    func report(item: UInt64) -> String {
        state.withLock { state in
            guard let archive = state.archives[item] else { return "not indexed yet" }
            switch archive.phase {
            case .ready(let tree): return "indexed: \(tree.index.members.count) members"
            case .failed(let error): return "error: \(error)"
            case .building:
                guard let source = archive.source, source.size > 0 else { return "indexing" }
                let read = source.bytesRead.withLock { $0 }
                return "indexing: " + RangeFS.percent(UInt64(min(read, source.size)), of: UInt64(source.size))
            }
        }
    }

    /// The archives whose index is being built, with their progress (for `rangefs status`).
    var building: [(item: UInt64, report: String)] {
        let items = state.withLock { state in
            state.archives.values.filter { if case .building = $0.phase { true } else { false } }.map(\.item)
        }
        return items.map { ($0, report(item: $0)) }
    }

    // MARK: Open members

    /// A handle for `member`.
    func open(_ member: OpenMember) -> UInt64 {
        state.withLock { state in
            let handle = Self.handleBit | state.nextHandle
            state.nextHandle += 1
            state.open[handle] = member
            return handle
        }
    }

    func member(handle: UInt64) -> OpenMember? {
        state.withLock { $0.open[handle] }
    }

    func close(handle: UInt64) -> OpenMember? {
        state.withLock { $0.open.removeValue(forKey: handle) }
    }
}
