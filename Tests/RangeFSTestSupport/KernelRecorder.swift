// A KernelNotifier for the core's unit tests: it keeps every notice the core sends the kernel, in order, for the
// tests to assert on (there is no kernel without FUSE).

import Dispatch
import Glibc
@testable import RangeFSFileSystem
@testable import RangeFSSystem

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

    /// While true, every notice waits before it is recorded: an open that waited for one would not answer.
    private let holding: LockedBox<Bool>

    /// `holding`: notices wait until `release()` (or 60 s), to show that nothing waits for them.
    public init(delay seconds: Double = 0, holding: Bool = false) {
        delay = useconds_t(seconds * 1e6)
        self.holding = LockedBox(holding)
    }

    /// Lets the held notices (and every later one) through.
    public func release() {
        holding.withLock { $0 = false }
    }

    /// A held notice goes through after 60 s anyway: a caller that waits for it on the test's own thread then
    /// fails the test's assertions instead of hanging it.
    private func pass() {
        if delay > 0 { usleep(delay) }
        let deadline = DispatchTime.now() + 60
        while holding.withLock({ $0 }) && DispatchTime.now() < deadline { usleep(1_000) }
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
        pass()
        recorded.withLock { $0.append(.name(name, parent: parent)) }
    }

    public func forgetPages(of inode: UInt64, in range: Range<UInt64>) {
        pass()
        recorded.withLock { $0.append(.pages(inode, range)) }
    }

    public func forgetAttributes(of inode: UInt64) {
        pass()
        recorded.withLock { $0.append(.attributes(inode)) }
    }
}
