import Glibc

/// A value guarded by a lock whose waiters sleep at once: the daemon's lock, for every shared value (issue 46).
///
/// Not `Synchronization.Mutex`: on Linux its slow path spins 1,000 `pause`s before it sleeps, and then sleeps on a
/// priority-inheritance futex, whose release hands the lock to the next waiter and waits for that thread to run. The
/// daemon runs more threads than the machine has cores (FUSE's, Dispatch's, curl's), so a holder is often off its
/// core while others want the lock: they spun through their time slices, and the hand-over queued every taker behind
/// a thread that was not running. Eight readers of a cached tree spent 29% of the daemon's samples in that spin
/// (docs/performance.md, "Locks that sleep"). glibc's default mutex does neither: a taker that finds it held sleeps
/// on the futex, and a release wakes one waiter but lets a running thread take the lock first.
public final class LockedBox<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: the value is reached only through `withLock`, under the mutex, which lives at a fixed
    // address from `init` to `deinit`; like `Mutex`, which is Sendable for any value, it hands values across
    // threads only as `sending`.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: consuming sending Value) {
        // SAFETY: initialised here, used only between here and deinit, and freed once in deinit.
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock. Not recursive: `body` must not take this lock again.
    @inlinable
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
