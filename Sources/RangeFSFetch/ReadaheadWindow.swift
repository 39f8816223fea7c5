/// Detects a sequential reader and says how far ahead of it to fetch.
///
/// Readahead is proportionate to use: a stream's window is what its reader has consumed so far, so a reader that
/// stops (`head`, `file`, a thumbnailer, a prober) costs about what it read, and one that keeps going (a copy, a
/// player) soon gets the full window.
///
/// - A stream is a run of reads each of which starts inside what the stream covers or just past its end. The
///   kernel's own readahead sends reads slightly out of order and several at once, and two daemon threads may
///   take two 1 MiB READs in the wrong order, so a read may lie behind the stream's end (anywhere in the stream)
///   or past it by up to `tolerance` or its own length. A jump elsewhere starts a new stream with no window, so
///   random readers (a media player seeking, a 4 KiB probe) never pay for readahead.
/// - After two sequential reads the window is `minimum`, a modest one. It grows only once the stream is longer
///   than `growthStart`: by four bytes for each byte the stream covers past that, until it is `minimum` plus all
///   the stream covers, and then with the stream, up to `maximum`. So after N bytes the window is at most
///   `minimum` + N, and what is fetched ahead at most doubles for each window's worth the reader consumes (slow
///   start, as TCP's): a copy over capped connections gets its 8 connections within a few MiB past `growthStart`
///   (with growth of one byte per byte, a cold copy at 8 MiB/s per connection lost 7%). The window is taken
///   from the stream as it was before the read being planned, so that one large READ cannot widen its own
///   readahead.
/// - `growthStart` is what the kernel reads of a file for a program that reads the first megabyte and stops: with
///   the mount's 1 MiB kernel readahead it keeps a window in flight ahead of the program and starts the next one
///   when the program reaches a mark in it, so `head -c 1000000` makes the kernel ask for about 3 MB. A stream
///   that short tells nothing about whether the program goes on; past it, the program itself kept reading.
///
/// The old rule (1 MiB after two reads, doubling per read to 32 MiB) reached 32 MiB after about 3 MB of kernel
/// READs: `head -c 1000000` of a fresh file fetched 35 MiB.
package struct ReadaheadWindow: Sendable {
    let minimum: UInt64
    let maximum: UInt64
    let tolerance: UInt64
    let growthStart: UInt64
    /// Where the stream began: the lowest offset of the reads that formed it.
    private var streamStart: UInt64 = 0
    /// Where the stream got to: the furthest end of the reads that formed it.
    private var streamEnd: UInt64?

    private var sequentialReads = 0
    private(set) var window: UInt64 = 0
    /// How many bytes the window grows by for each byte the stream covers past `growthStart` (see above).
    static let growthFactor: UInt64 = 4

    package init(minimum: UInt64 = 256 << 10, maximum: UInt64 = 32 << 20, tolerance: UInt64 = 256 << 10,
         growthStart: UInt64 = 3 << 20) {
        self.minimum = min(minimum, maximum)
        self.maximum = maximum
        self.tolerance = tolerance
        self.growthStart = growthStart
    }

    /// The largest window for a mount whose readahead setting is `configured` and whose cache may hold at most
    /// `cacheCap` bytes (nil: no cap). Under a cap, a window is at most a quarter of it (and at least `minimum`):
    /// blocks fetched ahead are stored until the reader gets to them, and a window beyond the cap would have the
    /// cap evict them unread whenever the reader lags (a busy machine), to be fetched again when it gets there.
    package static func maximum(configured: UInt64, cacheCap: Int?) -> UInt64 {
        guard let cacheCap else { return configured }
        return min(configured, max(256 << 10, UInt64(max(0, cacheCap)) / 4))
    }

    /// How many bytes the current stream covers: what its reader consumed, as far as the file system can tell.
    var streamLength: UInt64 { streamEnd.map { $0 - streamStart } ?? 0 }

    /// Records a read of `count` bytes at `offset`; returns how many bytes past its end to fetch.
    mutating func observe(offset: UInt64, count: Int) -> UInt64 {
        let end = offset + UInt64(count)
        let consumedBefore = streamLength
        if let streamEnd, offset + tolerance >= streamStart,
           offset <= streamEnd + max(tolerance, UInt64(count)) {
            sequentialReads += 1
            streamStart = min(streamStart, offset)
            self.streamEnd = max(streamEnd, end)
        } else {
            sequentialReads = 0
            window = 0
            streamStart = offset
            streamEnd = end
        }
        if sequentialReads >= 2 {
            let past = consumedBefore > growthStart ? consumedBefore - growthStart : 0
            window = min(maximum, minimum + min(consumedBefore, past * Self.growthFactor))
        }
        return window
    }
}
