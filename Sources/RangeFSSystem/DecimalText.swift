// Numbers read in place from the bytes of a header or a listing line. In System/ because Fetch (Content-Range) and
// Catalog (nginx's HTML listing) both read them, each on bytes instead of Characters (issue 46: grapheme breaking
// and Unicode properties were a few percent of a cold read of small files).

extension UnsafeBufferPointer<UInt8> {
    /// The number the bytes of `range` write, as `UInt64(_:)` reads one: an optional `+` (or `-` before a zero),
    /// then decimal digits only, within 64 bits; nil for anything else, the empty range included.
    /// For a bound below `Int.max`, a number within `0...bound` reads here exactly when `Int(_:)` reads it there.
    package func decimalNumber(in range: Range<Int>) -> UInt64? {
        var index = range.lowerBound
        var negative = false
        if index < range.upperBound, self[index] == UInt8(ascii: "+") || self[index] == UInt8(ascii: "-") {
            negative = self[index] == UInt8(ascii: "-")
            index += 1
        }
        guard index < range.upperBound else { return nil }
        var value: UInt64 = 0
        while index < range.upperBound {
            let digit = self[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            value = sum
            index += 1
        }
        return negative && value != 0 ? nil : value
    }
}
