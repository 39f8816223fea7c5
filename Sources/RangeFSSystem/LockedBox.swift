import Synchronization

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
