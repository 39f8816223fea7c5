// RFC 3339 timestamps, next to HTTPDate (whose calendar arithmetic they share).

/// RFC 3339 dates as Caddy writes them: `2026-11-23T10:00:00Z`, with optional fractions and offset.
enum RFC3339 {
    /// Seconds since 1970-01-01 UTC, or nil.
    static func parse(_ text: String) -> Int64? {
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
}
