// An `io` error's message is the one thing the kernel cannot pass on: a program gets EIO and nothing more. So the
// FUSE adapter hands every error it answers with to `RangeFS.noteFailure` first, and the message of each `io` one
// is logged here the first time it is seen, and counted every time (`rangefs_io_errors_total`). Once per distinct
// message, not once per reply: a program that reads a broken file in a loop gets thousands of EIOs a second, and
// one line says all they would. The messages are those `rangefs status` shows as a file's last error (URLs in them
// are redacted where they are made).
//
// The set of messages seen is bounded: past `limit` distinct ones it starts again, so a message can be logged a
// second time after a thousand others, never once per read.

import Logging
import RangeFSSystem

/// Logs each distinct `io` error message once and counts every `io` error answered.
final class IOErrorReport: Sendable {
    /// How many distinct messages are remembered before the set starts again.
    static let limit = 1024
    private let seen = LockedBox<Set<String>>([])

    /// Records one error answered to a program; only `io` errors are logged and counted.
    func note(_ error: FileSystemError, logger: Logger, metrics: Metrics) {
        guard case .io(let message) = error else { return }
        metrics.add("rangefs_io_errors_total")
        let isNew = seen.withLock { seen in
            if seen.contains(message) { return false }
            if seen.count >= Self.limit { seen.removeAll(keepingCapacity: true) }
            seen.insert(message)
            return true
        }
        if isNew { logger.warning("a program was answered EIO: \(message) (logged once per distinct message)") }
    }
}

extension RangeFS {
    /// The FUSE adapter calls this with every error it is about to answer with (the kernel passes on only its
    /// errno): an `io` error's message is logged the first time it is seen, and counted (IOErrorReport).
    public func noteFailure(_ error: FileSystemError) {
        ioErrors.note(error, logger: logger, metrics: metrics)
    }
}
