// Threads and a condition variable on pthreads: what Foundation's Thread and NSCondition gave, without Foundation
// (whose ICU data would be most of a static binary; see the README's install section).

import CLinux
import Glibc

/// Starts a detached thread named `name` that runs `body`. The name shows in `top -H` and in core dumps; the
/// kernel keeps its first 15 bytes. The thread gets the default stack (the soft `ulimit -s`, as Foundation's did).
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    // SAFETY: the retained box is released exactly once: by the new thread, or here if none was started.
    let context = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(&thread, nil, { context in
        let thread = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
        _ = rfs_set_process_name(thread.name)  // names the calling thread; the kernel keeps 15 bytes
        thread.body()
        return nil
    }, context)
    guard status == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        fatalError("cannot start thread \(name): \(String(cString: strerror(status)))")
    }
    pthread_detach(thread)
}

private final class ThreadBody {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// A mutex with a condition, for a wait with a deadline on state the mutex guards. Elsewhere System's `LockedBox`
/// is the rule.
public final class Condition: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutex is the synchronisation; both live at fixed addresses for their life.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        // SAFETY: both are initialised here, used only between here and deinit, and freed once in deinit.
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        // Deadlines are on the monotonic clock, so a change of the wall clock neither cuts nor stretches a wait.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Wakes every waiter. Call with the lock held, after changing what they wait for.
    public func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// The deadline `seconds` from now, for `wait(until:)`.
    public static func deadline(after seconds: Int) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        now.tv_sec += seconds
        return now
    }

    /// Waits, with the lock held, until `broadcast` or `deadline`; false once the deadline has passed.
    /// A wakeup may be spurious: check what you wait for in a loop.
    public func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }
}
