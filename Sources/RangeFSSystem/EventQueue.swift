// How a lower layer reports to an upper one without pointing at it (issue 48): the lower part is given a queue at
// its birth and sends values into it; the upper part, made later, drains it (`next`) on a thread of its own. Nothing is ever
// assigned to the lower part after its `init`, and it holds nothing of the upper one.
//
// The queue is unbounded: a sender never waits (it may hold a lock of its own, or run on the commit queue). What
// is sent before a drainer starts waits for it; what is sent after `close` is dropped, as nobody will act on it.

import Dispatch

/// A first-in, first-out queue of `Event`s: any thread sends, one drainer takes them in order.
package final class EventQueue<Event: Sendable>: Sendable {
    private struct State {
        var pending: [Event] = []
        var head = 0
        var closed = false
    }

    private let state = LockedBox(State())
    /// One signal per event sent, one for `close`, and one more passed on by each waiter the close woke.
    private let available = DispatchSemaphore(value: 0)

    package init() {}

    /// Adds `event` at the end; never waits. Dropped once the queue is closed.
    package func send(_ event: Event) {
        let sent = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.pending.append(event)
            return true
        }
        if sent { available.signal() }
    }

    /// The next event, waiting for one; nil once the queue is closed (the events still queued then are dropped),
    /// at once for a call that comes after the close.
    package func next() -> Event? {
        while true {
            if state.withLock({ $0.closed }) { return nil }
            available.wait()
            let taken = state.withLock { state -> (event: Event?, closed: Bool) in
                if state.closed { return (nil, true) }
                guard state.head < state.pending.count else { return (nil, false) }
                let event = state.pending[state.head]
                state.head += 1
                // The consumed front is dropped once it is most of the array, so the queue's memory follows what
                // is pending, not what was ever sent.
                if state.head * 2 >= state.pending.count {
                    state.pending.removeFirst(state.head)
                    state.head = 0
                }
                return (event, false)
            }
            if taken.closed {
                // The close's one signal may have woken this caller while another waits too: it wakes that one.
                available.signal()
                return nil
            }
            if let event = taken.event { return event }
        }
    }

    /// Ends the queue: `next` returns nil from now on, and `send` drops what it is given.
    package func close() {
        let wasOpen = state.withLock { state -> Bool in
            defer {
                state.closed = true
                state.pending = []
            }
            return !state.closed
        }
        // Several signals would do no harm; one wakes the drainer if it waits.
        if wasOpen { available.signal() }
    }
}
