// `rangefs mount` in the background waits for its child to say it is mounted (Daemon.swift). The child runs in a
// session of its own (so that closing the terminal later leaves the mount alone), and so does not hear the
// terminal's Ctrl-C; and a SIGTERM sent to the command reached only the command. A stop that came while it waited
// ended the command, and left the child probing or listing with nothing mounted (issue 45).
//
// Now the waiting command passes each stop on to the child, which leaves at once when it is not mounted yet
// (SignalWatcher.swift), or unmounts cleanly when it just came up; the command then ends with the child's own
// message. A child that is still there `killAfter` seconds after the stop is killed: nothing may outlive a stopped
// `rangefs mount` that never reported a mount.

import Dispatch
import Glibc
import RangeFSSystem

final class StopForwarder: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written only in init; `state` is locked.
    private var sources: [DispatchSourceSignal] = []
    private let state = LockedBox<(child: pid_t?, stop: Int32?)>((nil, nil))
    /// Seconds a child has to end after a stop before it is killed.
    static let killAfter = 20.0

    init() {
        for number in SignalWatcher.stopping {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.stop(number) }
            source.resume()
            sources.append(source)
        }
    }

    /// The child to pass stops on to; a stop that came before it existed is passed on now.
    func forward(to child: pid_t) {
        let early = state.withLock { state -> Int32? in
            state.child = child
            return state.stop
        }
        if let early { send(early, to: child) }
    }

    private func stop(_ number: Int32) {
        let child = state.withLock { state -> pid_t? in
            state.stop = number
            return state.child
        }
        if let child { send(number, to: child) }
    }

    private func send(_ number: Int32, to child: pid_t) {
        kill(child, number)
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.killAfter) {
            // The child is not reaped before its pipe closes (Daemon.spawnAndWait), so its pid is still its own:
            // alive, or a zombie that the kill leaves alone.
            guard !UnmountCommand.waitForExit(of: child, seconds: 0.1) else { return }
            printError("rangefs: the background process (pid \(child)) did not stop within \(Int(Self.killAfter)) s "
                       + "of \(SignalWatcher.name(number)); killing it")
            kill(child, SIGKILL)
        }
    }

    /// Stops watching (the child reported, or failed to start).
    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
