// How fast a file's bytes arrive, for `status`. Fetches are bursty: readahead fills its window in a burst and then
// waits for the reader, so two samples of the stored bytes 250 ms apart (what status took before) saw either a
// burst (64 MiB/s for a copy running at 16) or nothing (0). The bytes are counted as they are stored instead, in
// buckets of a quarter second over the last few seconds, and the rate is their sum over the time they cover: the
// pace of the copy, as `pv` or `rsync --progress` show it, known at once by a one-shot `status`.

/// Bytes stored per second over the last `window` seconds.
struct TransferRate: Sendable {
    /// The seconds the rate is taken over.
    static let window = 4.0
    static let bucketSeconds = 0.25
    private static let bucketCount = Int(window / bucketSeconds)

    private var buckets = [UInt64](repeating: 0, count: bucketCount)
    /// The number (time / bucketSeconds) of the newest bucket written.
    private var newest: Int64 = 0
    /// When the first bytes were counted: a rate over less than the window divides by the time since.
    private var start: Double?

    /// Counts `bytes` stored at `time` (monotonic seconds).
    mutating func add(_ bytes: UInt64, at time: Double) {
        let number = Int64(time / Self.bucketSeconds)
        if start == nil {
            start = time
            newest = number
        }
        advance(to: number)
        buckets[Int(number % Int64(Self.bucketCount))] += bytes
    }

    /// Bytes per second over the window that ends at `time` (or since the first bytes, if later), 0 when none came.
    func rate(at time: Double) -> Double {
        guard let start else { return 0 }
        let number = Int64(time / Self.bucketSeconds)
        let oldest = number - Int64(Self.bucketCount) + 1
        guard newest >= oldest else { return 0 }
        // The ring holds the buckets numbered newest - count + 1 ... newest; those before `oldest` are too old.
        var total: UInt64 = 0
        for bucket in max(oldest, newest - Int64(Self.bucketCount) + 1)...newest {
            total += buckets[Int(bucket % Int64(Self.bucketCount))]
        }
        // Never less than one bucket: the first bytes of a transfer are no rate over a microsecond.
        let span = min(Self.window, max(Self.bucketSeconds, time - start))
        return Double(total) / span
    }

    /// Empties the buckets between the newest written and `number`.
    private mutating func advance(to number: Int64) {
        guard number > newest else { return }
        for bucket in (newest + 1)...min(number, newest + Int64(Self.bucketCount)) {
            buckets[Int(bucket % Int64(Self.bucketCount))] = 0
        }
        newest = number
    }
}
