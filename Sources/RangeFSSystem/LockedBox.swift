import Glibc

/// A value guarded by a lock that spins briefly, then sleeps: the daemon's lock, for every shared value (issue 46).
///
/// Not `Synchronization.Mutex`: on Linux its slow path spins 1,000 `pause`s before it sleeps, and then sleeps on a
/// priority-inheritance futex, whose release hands the lock to the next waiter and waits for that thread to run. The
/// daemon runs more threads than the machine has cores (FUSE's, Dispatch's, curl's), so a holder is often off its
/// core while others want the lock: they spun through their time slices, and the hand-over queued every taker behind
/// a thread that was not running. Eight readers of a cached tree spent 29% of the daemon's samples in that spin
/// (docs/performance.md, "Locks that do not spin a time slice away"). glibc's adaptive mutex spins at most 100 times
/// (up to twice its running average of spins needed, plus ten), then sleeps on a plain futex, and a release wakes
/// one waiter but lets a running thread take the lock first. It spins at all because a lock that slept at once
/// (glibc's default kind) made a taker pay a wake-up for every brief hold: a remounted tree read by one reader took
/// 1.10 times as long as with `Mutex` in the project's bench; the adaptive kind is as fast there as `Mutex` or
/// faster, and as fast as the default kind with eight readers (docs/performance.md has the runs).
public final class LockedBox<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: the value is reached only through `withLock`, under the mutex, which lives at a fixed
    // address from `init` to `deinit`; like `Mutex`, which is Sendable for any value, it hands values across
    // threads only as `sending`.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: consuming sending Value) {
        // SAFETY: made here, used only between here and deinit, and freed once in deinit.
        mutex = makeAdaptiveMutex()
        self.value = value
    }

    deinit {
        freeMutex(mutex)
    }

    /// Runs `body` with the value, holding the lock. Not recursive: `body` must not take this lock again.
    @inlinable
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let taken = pthread_mutex_lock(mutex)
        assert(taken == 0, "a LockedBox taken again by the thread that holds it (error \(taken))")
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A new adaptive mutex at a fixed address (see `LockedBox`), for `freeMutex` to free.
/// In a debug build (the tests'), an error-checking one instead: a thread that takes a lock it holds gets EDEADLK,
/// which the callers' assertions stop on, as `Mutex` stopped on it, where the adaptive kind would hang unseen.
func makeAdaptiveMutex() -> UnsafeMutablePointer<pthread_mutex_t> {
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    #if DEBUG
    pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
    #else
    pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
    #endif
    pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
    return mutex
}

/// Destroys and frees a mutex from `makeAdaptiveMutex`, which nobody holds.
func freeMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
}
