// The parts of a BlockSink's state, each its own concept (BlockSink.swift uses them): what the transfer asks for
// and who it answers to (fixed at its birth), what its current attempt found (new for each attempt), what its
// attempts made of it so far, and whether anybody still wants it.

import Logging
import RangeFSCache
import RangeFSSystem

extension BlockSink {
    /// What a transfer asks for, and how: fixed at its birth.
    package struct Plan {
        /// The file's own URL (the primary, with mirrors).
        let url: String
        /// The file's mirrors, if it has any; nil asks `url` every time.
        let mirrors: MirrorSet?
        /// Streams the whole file without a Range header, skipping blocks already present.
        let wholeFile: Bool
        /// The file's size is not yet known (its server sends no length): the entry's size is a capacity, and the
        /// body's end, or its outgrowing the capacity, reshapes the entry (`StreamStep.ended`, `.outgrew`).
        let sizeUnknown: Bool
        let maxBytesPerSecond: Int?
        /// The entry the transfer started on: the scheduler counts it as that entry's until it ends.
        let countedStore: any BlockStore
    }

    /// Who a transfer answers to and runs through; handed over at its birth.
    struct Context {
        /// The engines its attempts are sent through, and the counters its attempts end in.
        let engines: TransferEngines
        let metrics: Metrics
        let policy: FetchPolicy
        let logger: Logger
        // Strong: a transfer may finish after everything else let go of its owner. The owner keeps running fill
        // sinks only until `finished`, so the cycle ends with the transfer.
        let owner: TransferOwner
    }

    /// What the current attempt found. Each attempt starts with a new one, so nothing of an attempt's answer
    /// leaks into the next.
    /// More than 12 stored properties: a record of one attempt's findings, all dropped together when the next attempt
    /// starts; that is the point of keeping them in one value.
    struct Attempt {
        /// Where the attempt started, to tell whether it made progress.
        var startOffset: UInt64 = 0
        /// Its first block, and how many bytes of it were here before.
        var firstBlock = 0
        var partialBytes = 0
        /// The mirror it asks, and when it started (monotonic seconds), to measure the mirror.
        var choice: MirrorSet.Choice?
        var began = 0.0
        /// Set when the mirror turned out to disagree with the file: why it is dropped.
        var dropReason: String?
        /// Why the attempt was cancelled by us, if it was.
        var failure: FetchError?
        /// The body of an error answer, while it is read for an object store's Code (BlockSink+Head.swift).
        var errorBody: [UInt8]?
        /// The body length its head states (its Content-Range's span, or the file's size for a whole-file
        /// stream), and the body bytes received so far.
        var expectedBody: UInt64?
        var bodyReceived: UInt64 = 0
        /// Whether no header fixes the body's length, so its blocks are held here until it ends right.
        var holdingBack = false
        /// Blocks held back, in order from `firstBlock`.
        var held: [BlockBuffer] = []
        /// The attempt was given up to ask again at once (its answer showed that the ETag rotates).
        var askAgain = false
    }

    /// What the attempts so far made of the transfer.
    struct Progress {
        /// Attempts since the last one that made progress.
        var attempts = 0
        /// The furthest block a whole-file stream's attempts reached, to tell whether the current one made
        /// progress (each starts at byte 0).
        var furthestBlock = 0
    }

    /// Whether anybody still wants the transfer: asked of its owner at most every `checkInterval` of its body.
    struct Interest {
        /// How often a reader's transfer asks whether it is still wanted; a server that trickles a byte a second
        /// is left this long after its last reader, not minutes later.
        static let checkInterval: UInt64 = 1_000_000_000
        /// When the transfer last asked (uptime nanoseconds).
        var checkedAt: UInt64 = 0
        /// It was given up because nobody wants it any more: every reader closed its file, and nothing completes it.
        var unwanted = false
        /// Until when (uptime nanoseconds) the transfer is wanted without asking (an adopted probe's: always,
        /// `adoptAttempt`).
        var wantedWithoutAskingUntil: UInt64 = 0
    }
}
