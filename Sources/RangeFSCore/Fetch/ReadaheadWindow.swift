/// Detects a sequential reader and says how far ahead of it to fetch.
///
/// The kernel's own readahead sends reads slightly out of order and several at once, so "sequential" means
/// "starts near where the stream got to", within `tolerance`. The window starts at `minimum` after two sequential
/// reads in a row and doubles with each further one up to `maximum`; a jump elsewhere resets it, so random readers
/// (a media player seeking, a 4 KiB probe) never pay for readahead.
struct ReadaheadWindow: Sendable {
    let minimum: UInt64
    let maximum: UInt64
    let tolerance: UInt64
    /// Where the stream got to: the furthest end of the reads that formed it.
    private var streamEnd: UInt64?

    private var sequentialReads = 0
    private(set) var window: UInt64 = 0

    init(minimum: UInt64 = 1 << 20, maximum: UInt64 = 32 << 20, tolerance: UInt64 = 256 << 10) {
        self.minimum = minimum
        self.maximum = maximum
        self.tolerance = tolerance
    }

    /// Records a read of `count` bytes at `offset`; returns how many bytes past its end to fetch.
    mutating func observe(offset: UInt64, count: Int) -> UInt64 {
        let end = offset + UInt64(count)
        if let streamEnd, offset + tolerance >= streamEnd, offset <= streamEnd + tolerance {
            sequentialReads += 1
            self.streamEnd = max(streamEnd, end)
        } else {
            sequentialReads = 0
            window = 0
            streamEnd = end
        }
        if sequentialReads >= 2 {
            window = window == 0 ? minimum : min(maximum, window * 2)
        }
        return window
    }
}
