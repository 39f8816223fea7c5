// A KernelNotifier for the core's unit tests: it keeps every notice the core sends the kernel, in order, for the
// tests to assert on (there is no kernel without FUSE).

import Dispatch
import Glibc
@testable import RangeFSCore

/// Records the kernel notices a file system sends.
public final class KernelRecorder: KernelNotifier {
    /// One notice, as the kernel would get it.
    public enum Notice: Equatable, Sendable {
        case name(String, parent: UInt64)
        case pages(UInt64, Range<UInt64>)
        case attributes(UInt64)
    }

    private let recorded = LockedBox<[Notice]>([])
    /// How long each notice takes to reach the kernel: a busy machine's, to show what waits for a notice and what
    /// only queues it.
    private let delay: useconds_t

    public init(delay seconds: Double = 0) {
        delay = useconds_t(seconds * 1e6)
    }

    /// Every notice so far, in the order sent.
    public var notices: [Notice] {
        recorded.withLock { $0 }
    }

    /// Waits up to `timeout` seconds (a generous bound: notices are sent from a queue) until a notice satisfies
    /// `condition`; returns the notices then.
    @discardableResult
    public func wait(timeout: Double = 30, until condition: (Notice) -> Bool) -> [Notice] {
        let deadline = DispatchTime.now() + timeout
        while !notices.contains(where: condition) && DispatchTime.now() < deadline { usleep(5_000) }
        return notices
    }

    public func forgetName(_ name: String, in parent: UInt64) {
        if delay > 0 { usleep(delay) }
        recorded.withLock { $0.append(.name(name, parent: parent)) }
    }

    public func forgetPages(of inode: UInt64, in range: Range<UInt64>) {
        if delay > 0 { usleep(delay) }
        recorded.withLock { $0.append(.pages(inode, range)) }
    }

    public func forgetAttributes(of inode: UInt64) {
        if delay > 0 { usleep(delay) }
        recorded.withLock { $0.append(.attributes(inode)) }
    }
}
