import Glibc

/// A lock taken and released by separate calls, for the one place that must hold many at once: a group commit
/// holds the commit lock of every entry it covers across one flush of the whole file system (CacheStore+Commit).
/// Not recursive. Elsewhere a `LockedBox`, whose scope is a closure, is the rule.
package final class ExclusiveLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutex is the synchronisation; it lives at a fixed address for its life.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        // LockedBox's kind of mutex, for its reasons (LockedBox.swift).
        mutex = makeAdaptiveMutex()
    }

    deinit {
        freeMutex(mutex)
    }

    package func lock() {
        let taken = pthread_mutex_lock(mutex)
        assert(taken == 0, "an ExclusiveLock taken again by the thread that holds it (error \(taken))")
    }

    /// Only by the thread that took it (a debug build checks).
    package func unlock() {
        let released = pthread_mutex_unlock(mutex)
        assert(released == 0, "an ExclusiveLock released by a thread that does not hold it (error \(released))")
    }

    package func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
