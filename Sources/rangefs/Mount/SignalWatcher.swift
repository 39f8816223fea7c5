// SIGINT, SIGTERM and SIGHUP stop a mount in any state (issue 45). Before anything is mounted, a mount may wait a
// long time: probing its URLs, or listing a directory URL whose server sends the listing slowly or without end
// (bounded by `--listing-timeout`, ten minutes by default). A stop then used to be remembered for a mount that had
// not come up, and the daemon lived on, fetching, with nothing mounted.
//
//   - Before the mount starts (`starting`): the process leaves at once through `beforeMount` (a line on stderr,
//     the readiness line for the parent, `_exit`). Nothing is served yet, and the cache is crash-safe (DESIGN.md
//     §3: a block is present only once committed), so leaving mid-probe loses no more than a crash would: the
//     progress of what was in flight. `_exit`, not `exit`: other threads (the fetchers) still run, and atexit
//     handlers and destructors must not run under them.
//   - While the mount starts (`mounting`): remembered, and carried out by `watch` as soon as the mount exists;
//     never an exit there, which could leave a mount without its daemon.
//   - Once mounted: a clean unmount, as before.

import Dispatch
import Glibc
import RangeFSFUSE
import RangeFSSystem

final class SignalWatcher: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written only in init, before the watcher is shared; `state` is locked.
    private var sources: [DispatchSourceSignal] = []
    private enum Phase {
        case starting
        case mounting
        case mounted(FUSEMount)
    }
    private let state = LockedBox<(phase: Phase, stopRequested: Bool)>((.starting, false))
    private let beforeMount: @Sendable (_ signal: Int32) -> Never

    /// The signals that stop a mount.
    static let stopping = [SIGINT, SIGTERM, SIGHUP]

    /// Watches the stopping signals; one that comes before `mounting()` calls `beforeMount`, which ends the
    /// process.
    init(beforeMount: @escaping @Sendable (_ signal: Int32) -> Never) {
        self.beforeMount = beforeMount
        for number in Self.stopping {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.stop(number) }
            source.resume()
            sources.append(source)
        }
    }

    /// Called just before the mount is made: from now on a stop waits for `watch`, and unmounts.
    func mounting() {
        state.withLock { $0.phase = .mounting }
    }

    /// The mount to unmount on a signal; if one already came, it is unmounted now.
    func watch(_ mount: FUSEMount) {
        let stopNow = state.withLock { state -> Bool in
            state.phase = .mounted(mount)
            return state.stopRequested
        }
        if stopNow { mount.requestUnmount() }
    }

    private func stop(_ number: Int32) {
        let mount = state.withLock { state -> FUSEMount? in
            state.stopRequested = true
            switch state.phase {
            // Under the lock: the main thread cannot begin mounting while the process leaves.
            case .starting: beforeMount(number)
            case .mounting: return nil
            case .mounted(let mount): return mount
            }
        }
        mount?.requestUnmount()
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }

    /// `number`'s name, as a message shows it.
    static func name(_ number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(number)"
        }
    }
}
