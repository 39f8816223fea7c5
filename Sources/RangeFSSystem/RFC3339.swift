// RFC 3339 timestamps, next to HTTPDate (whose calendar arithmetic they share).

/// RFC 3339 dates as Caddy writes them: `2026-11-23T10:00:00Z`, with optional fractions and offset.
package enum RFC3339 {
    /// Seconds since 1970-01-01 UTC, or nil.
    package static func parse(_ text: String) -> Int64? {
        if let seconds = parseCanonical(text) { return seconds }
        let parts = text.split(separator: "T", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let date = parts[0].split(separator: "-").compactMap { Int($0) }
        guard date.count == 3 else { return nil }
        var time = Substring(parts[1])
        var offset = 0
        if time.hasSuffix("Z") || time.hasSuffix("z") {
            time = time.dropLast()
        } else if let sign = time.lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = time[time.index(after: sign)...].split(separator: ":").compactMap { Int($0) }
            guard zone.count == 2, (0..<24).contains(zone[0]), (0..<60).contains(zone[1]) else { return nil }
            offset = (zone[0] * 3600 + zone[1] * 60) * (time[sign] == "+" ? 1 : -1)
            time = time[..<sign]
        }
        if let dot = time.firstIndex(of: ".") { time = time[..<dot] }
        let clock = time.split(separator: ":").compactMap { Int($0) }
        // Bounded before any arithmetic, which a listing's `99999999999-01-01` would overflow.
        guard clock.count == 3, (0...9999).contains(date[0]), (1...12).contains(date[1]), (1...31).contains(date[2]),
              (0..<24).contains(clock[0]), (0..<60).contains(clock[1]), (0...60).contains(clock[2]) else { return nil }
        return HTTPDate.daysSinceEpoch(year: date[0], month: date[1], day: date[2]) * 86_400
            + Int64(clock[0] * 3600 + clock[1] * 60 + clock[2] - offset)
    }

    /// The form every object store writes, `2026-11-26T04:08:04.710Z` (fraction optional), read from its bytes:
    /// a million objects' dates each split into substrings took an eighth of a listing's time. Nil for any
    /// other form, which `parse` then reads in full; where both read a date, they read the same.
    private static func parseCanonical(_ text: String) -> Int64? {
        var text = text
        // SAFETY: the buffer is the string's own contiguous UTF-8, read only inside the closure.
        return text.withUTF8 { canonical($0) }
    }

    /// A date as `parse` reads it, from its UTF-8 bytes (a listing's pages read straight to records): the canonical
    /// form with no string made, any other through `parse`.
    package static func parse(_ bytes: ArraySlice<UInt8>) -> Int64? {
        if let seconds = canonical(bytes) { return seconds }
        return String(validating: bytes, as: UTF8.self).flatMap { parse($0) }
    }

    /// The canonical form read from `text`'s bytes, whatever index they start at.
    private static func canonical<Bytes: RandomAccessCollection>(_ text: Bytes) -> Int64?
        where Bytes.Element == UInt8, Bytes.Index == Int {
        let base = text.startIndex
        let count = text.count
        func byte(_ offset: Int) -> UInt8 { text[base + offset] }
        guard count >= 20, byte(4) == UInt8(ascii: "-"), byte(7) == UInt8(ascii: "-"), byte(10) == UInt8(ascii: "T"),
              byte(13) == UInt8(ascii: ":"), byte(16) == UInt8(ascii: ":"), byte(count - 1) == UInt8(ascii: "Z")
        else { return nil }
        if count > 20 {
            guard byte(19) == UInt8(ascii: "."), count > 21,
                  (20..<(count - 1)).allSatisfy({ byte($0) >= 0x30 && byte($0) <= 0x39 }) else { return nil }
        }
        func number(_ start: Int, _ length: Int) -> Int? {
            var value = 0
            for offset in start..<(start + length) {
                let digit = byte(offset)
                guard digit >= 0x30, digit <= 0x39 else { return nil }
                value = value * 10 + Int(digit - 0x30)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
              let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        return HTTPDate.daysSinceEpoch(year: year, month: month, day: day) * 86_400
            + Int64(hour * 3600 + minute * 60 + second)
    }
}
