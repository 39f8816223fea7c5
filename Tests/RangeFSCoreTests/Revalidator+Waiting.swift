// What the revalidator's tests wait for, kept here rather than in the product: the product never waits for its
// own checks (a check of a server that never answers waits for its timeout).

import Dispatch
@testable import RangeFSFileSystem

extension Revalidator {
    /// Waits until no check is left, and the last one's waiters were called (a check of a server that never
    /// answers waits for its timeout).
    func settle() {
        let done = DispatchSemaphore(value: 0)
        let idle = checks.withLock { state -> Bool in
            if state.lines.isEmpty { return true }
            state.idle.append { done.signal() }
            return false
        }
        if !idle { done.wait() }
    }

    /// Probes the offline files now and returns when every one of those checks is done.
    func checkOfflineFilesNow() {
        let group = DispatchGroup()
        checkOfflineFiles(group: group)
        group.wait()
    }
}
