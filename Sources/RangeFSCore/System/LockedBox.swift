import Synchronization

/// A weak reference that may be read from any thread: how a part made in its owner's initializer reaches the
/// owner without keeping it alive.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    private struct Slot { weak var object: Object? }
    private let slot = Mutex(Slot())

    init() {}

    var object: Object? {
        get { slot.withLock { $0.object } }
        set { slot.withLock { $0.object = newValue } }
    }
}

/// A value guarded by a `Mutex`, shareable between threads as a class reference.
public final class LockedBox<Value: ~Copyable>: Sendable {
    // Sendable without @unchecked: Mutex is Sendable for any Value, and the value is reached only through it.
    private let mutex: Mutex<Value>

    public init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock(body)
    }
}
