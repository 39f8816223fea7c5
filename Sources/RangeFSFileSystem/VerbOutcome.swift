// What one of the user's verbs on a running mount (RangeFS+Verbs.swift) answers: in the words the user reads, so
// that the control channel only carries it. Every verb reports what really happened: an error that stops part of
// its work is in its answer, not only in the log.

/// The answer of a verb: `done` with its one-line summary (the name a file got, the block map, ...), `failed`
/// with the one line that says why (naming the input, the problem and the fix), or `foundProblems`: the verb ran
/// to its end and found something wrong (verify's failed blocks), said in one line that is both.
package enum VerbOutcome: Sendable, Equatable {
    case done(String)
    case failed(String)
    case foundProblems(String)
}
