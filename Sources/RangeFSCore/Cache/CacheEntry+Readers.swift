// Who still wants this file's blocks. A transfer that a reader started is work for nobody once that reader is gone,
// but the daemon cannot see it go: the kernel's READ that waits for the blocks is a page-cache readahead request,
// which no signal interrupts, and which holds the file's handle open (no RELEASE comes) until it is answered. What
// the daemon can see is who asked: each READ carries the pid of the process that caused it. So the entry keeps the
// pids of its waiting READs, and a transfer asks whether any of them is still alive (the transfers that fill it ask).

extension CacheEntry {
    /// A READ of process `pid` (0: unknown) starts waiting on this entry.
    func beginRead(pid: Int32) {
        pendingReaders.withLock { $0[pid, default: 0] += 1 }
    }

    /// That READ was answered.
    func endRead(pid: Int32) {
        pendingReaders.withLock { readers in
            if let count = readers[pid], count > 1 { readers[pid] = count - 1 } else { readers[pid] = nil }
        }
    }

    /// Whether a live process still uses this file: one of the processes whose READs wait on it still exists, or,
    /// when no READ waits, a handle is open on it.
    var hasLiveUse: Bool {
        let readers = pendingReaders.withLock { Array($0.keys) }
        if readers.isEmpty { return users.load(ordering: .relaxed) > 0 }
        return readers.contains(where: FileSystemCalls.processExists)
    }
}
