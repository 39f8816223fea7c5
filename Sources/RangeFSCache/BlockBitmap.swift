/// A fixed-size set of block indices, one bit per block, with a running count of the set bits.
package struct BlockBitmap: Equatable, Sendable {
    /// How many blocks the bitmap covers.
    package let blockCount: Int
    /// How many bits are set.
    private(set) var setCount: Int = 0
    private var words: [UInt64]

    /// An empty bitmap covering `blockCount` blocks.
    init(blockCount: Int) {
        precondition(blockCount >= 0)
        self.blockCount = blockCount
        self.words = Array(repeating: 0, count: (blockCount + 63) / 64)
    }

    /// A bitmap decoded from `bytes` (bit `i` is bit `i % 8` of byte `i / 8`); bits past `blockCount` are ignored.
    init(blockCount: Int, packedBytes bytes: some Collection<UInt8>) {
        self.init(blockCount: blockCount)
        for (byteIndex, byte) in bytes.enumerated() where byte != 0 {
            for bit in 0..<8 where byte & (1 << bit) != 0 {
                let index = byteIndex * 8 + bit
                if index < blockCount { insert(index) }
            }
        }
    }

    /// The bitmap as packed bytes, the inverse of `init(blockCount:packedBytes:)`.
    var packedBytes: [UInt8] {
        (0..<((blockCount + 7) / 8)).map { byteIndex in
            UInt8(truncatingIfNeeded: words[byteIndex / 8] >> UInt64((byteIndex % 8) * 8))
        }
    }

    var isFull: Bool { setCount == blockCount }

    package func contains(_ index: Int) -> Bool {
        precondition(index >= 0 && index < blockCount, "block \(index) outside 0..<\(blockCount)")
        return words[index / 64] & (1 << UInt64(index % 64)) != 0
    }

    /// Sets bit `index`; returns whether it was clear before.
    @discardableResult
    mutating func insert(_ index: Int) -> Bool {
        guard !contains(index) else { return false }
        words[index / 64] |= 1 << UInt64(index % 64)
        setCount += 1
        return true
    }

    /// Clears bit `index`; returns whether it was set before.
    @discardableResult
    mutating func remove(_ index: Int) -> Bool {
        guard contains(index) else { return false }
        words[index / 64] &= ~(1 << UInt64(index % 64))
        setCount -= 1
        return true
    }

    /// Whether every block in `blocks` is set.
    func containsAll(_ blocks: Range<Int>) -> Bool {
        blocks.allSatisfy(contains)
    }

    /// The maximal runs of clear bits inside `blocks`, in order.
    func clearRuns(in blocks: Range<Int>) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var runStart: Int?
        for index in blocks {
            if contains(index) {
                if let start = runStart { runs.append(start..<index); runStart = nil }
            } else if runStart == nil {
                runStart = index
            }
        }
        if let start = runStart { runs.append(start..<blocks.upperBound) }
        return runs
    }
}
