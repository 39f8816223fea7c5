// Descriptors for cache files, bounded whatever the number of files.
//
// A mount of 10,000 URLs must not hold 10,000 × 3 descriptors: under the common limit of 1024 open files the
// opens past it fail with EMFILE, and a reader gets EIO. So the cache's files are `PooledFile`s, which hold a
// path, not a descriptor. Each call borrows a descriptor from the pool for its length (`withDescriptor`); the
// pool keeps descriptors open between calls, up to its capacity, and closes the least recently used idle one to
// make room. An open that still fails with EMFILE or ENFILE (sockets and other files share the process's limit)
// closes another idle descriptor and tries again, so a reader never sees those errors while the pool holds any.
//
// A descriptor is closed only while no call borrows it. fdatasync after a close and reopen still covers what was
// written through the old descriptor: dirty pages belong to the inode, not to the descriptor.
//
// Lock: `state` is a leaf. `open(2)` runs under it (a local file opens in microseconds), so two calls never open
// the same file twice; nothing else is taken under it.

import Glibc

/// A bounded set of open descriptors, shared by every `PooledFile` made from it.
package final class DescriptorPool: Sendable {
    /// Descriptors the pool keeps open at most (borrowed ones included).
    let capacity: Int

    struct Slot {
        let path: String
        let flags: Int32
        var descriptor: Int32 = -1
        /// Calls using the descriptor now; it is closed only at zero.
        var borrowers = 0
        var lastUse: UInt64 = 0
    }

    struct State {
        var nextID: UInt64 = 1
        var tick: UInt64 = 0
        var slots: [UInt64: Slot] = [:]
        /// IDs of slots whose descriptor is open.
        var open: Set<UInt64> = []
        /// Opens that found the process out of descriptors (EMFILE/ENFILE) and closed one of ours to go on.
        var exhaustions = 0
    }

    let state = LockedBox(State())

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The capacity for this process: raises the soft limit on open files to the hard one (systemd's advice for
    /// services that need many), then leaves a reserve for sockets, FUSE, logs and metadata files: a quarter of the
    /// limit, between 32 and 512. At most 8,192 descriptors: beyond that more gives nothing.
    package static func capacityForThisProcess() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 256 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let total = Int(min(limit.rlim_cur, 1 << 20))
        let reserve = min(512, max(32, total / 4))
        return min(8192, max(8, total - reserve))
    }

    /// A file of this pool: opened with `flags` on first use, closed when the pool needs room.
    package func file(path: String, flags: Int32) -> PooledFile {
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.slots[id] = Slot(path: path, flags: flags)
            return id
        }
        return PooledFile(pool: self, id: id, path: path)
    }

    /// Descriptors open now.
    var openCount: Int { state.withLock { $0.open.count } }

    /// How often an open met EMFILE or ENFILE and closed an idle descriptor of the pool to go on.
    var exhaustionCount: Int { state.withLock { $0.exhaustions } }

    /// Opens the file behind `id` (or reuses its descriptor) and marks it borrowed.
    func borrow(_ id: UInt64) throws(SystemError) -> Int32 {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let outcome: Result<Int32, SystemError>? = state.withLock { state in
                guard var slot = state.slots[id] else {
                    return .failure(SystemError(call: "open", path: "(closed pooled file)", errno: .badDescriptor))
                }
                state.tick += 1
                slot.lastUse = state.tick
                if slot.descriptor >= 0 {
                    slot.borrowers += 1
                    state.slots[id] = slot
                    return .success(slot.descriptor)
                }
                while state.open.count >= capacity {
                    guard Self.closeLeastRecentlyUsed(&state) else { return nil }
                }
                while true {
                    let descriptor = Glibc.open(slot.path, slot.flags | O_CLOEXEC, 0o600)
                    if descriptor >= 0 {
                        slot.descriptor = descriptor
                        slot.borrowers = 1
                        state.slots[id] = slot
                        state.open.insert(id)
                        return .success(descriptor)
                    }
                    let code = Errno.current
                    if code == .interrupted { continue }
                    guard code == .tooManyOpenFiles || code == .tooManyOpenFilesInSystem else {
                        return .failure(SystemError(call: "open", path: slot.path, errno: code))
                    }
                    state.exhaustions += 1
                    guard Self.closeLeastRecentlyUsed(&state) else { return nil }
                }
            }
            switch outcome {
            case .success(let descriptor): return descriptor
            case .failure(let error): throw error
            case nil:
                // Every descriptor of the pool is in use by a call, which returns it within microseconds.
                guard ContinuousClock.now < deadline else {
                    let path = state.withLock { $0.slots[id]?.path ?? "" }
                    throw SystemError(call: "open", path: path, errno: .tooManyOpenFiles)
                }
                usleep(1000)
            }
        }
    }

    /// Ends a call's use of `id`'s descriptor.
    func giveBack(_ id: UInt64) {
        state.withLock { state in state.slots[id]?.borrowers -= 1 }
    }

    /// Forgets `id`, closing its descriptor (its file was released; nobody borrows it any more).
    func remove(_ id: UInt64) {
        state.withLock { state in
            guard let slot = state.slots.removeValue(forKey: id) else { return }
            if slot.descriptor >= 0 {
                close(slot.descriptor)
                state.open.remove(id)
            }
        }
    }

    /// Closes every descriptor no call borrows: the next call on its file opens it again by its path (a test that
    /// moves an entry's files away makes its commits fail so).
    func closeIdleDescriptors() {
        state.withLock { state in
            for id in state.open {
                guard let slot = state.slots[id], slot.borrowers == 0, slot.descriptor >= 0 else { continue }
                close(slot.descriptor)
                state.slots[id]?.descriptor = -1
                state.open.remove(id)
            }
        }
    }

    /// Closes the descriptor that was used least recently and is not borrowed; false if every one is borrowed.
    private static func closeLeastRecentlyUsed(_ state: inout State) -> Bool {
        var oldest: (id: UInt64, lastUse: UInt64)?
        for id in state.open {
            guard let slot = state.slots[id], slot.borrowers == 0 else { continue }
            if oldest == nil || slot.lastUse < oldest!.lastUse { oldest = (id, slot.lastUse) }
        }
        guard let oldest else { return false }
        close(state.slots[oldest.id]!.descriptor)
        state.slots[oldest.id]!.descriptor = -1
        state.open.remove(oldest.id)
        return true
    }
}

/// A file of a `DescriptorPool`: it holds no descriptor of its own, and borrows one for each call.
package final class PooledFile: FileOperations, Sendable {
    package let path: String
    package let pool: DescriptorPool
    let id: UInt64

    init(pool: DescriptorPool, id: UInt64, path: String) {
        self.pool = pool
        self.id = id
        self.path = path
    }

    deinit { pool.remove(id) }

    package func withDescriptor<Result>(_ body: (Int32) throws(SystemError) -> Result) throws(SystemError) -> Result {
        let descriptor = try pool.borrow(id)
        defer { pool.giveBack(id) }
        return try body(descriptor)
    }

    /// A descriptor of this file held open until the lease is released, for a reply that reads it after the
    /// call that made it returned (a splice from the file).
    package func lease() throws(SystemError) -> FileLease {
        FileLease(file: self, descriptor: try pool.borrow(id))
    }
}

/// A borrowed descriptor of a pooled file, given back when the lease is released.
public final class FileLease: Sendable, Equatable {
    public let descriptor: Int32
    let file: PooledFile

    init(file: PooledFile, descriptor: Int32) {
        self.file = file
        self.descriptor = descriptor
    }

    deinit { file.pool.giveBack(file.id) }

    public static func == (lhs: FileLease, rhs: FileLease) -> Bool { lhs === rhs }
}
