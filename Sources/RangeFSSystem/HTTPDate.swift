// HTTP dates (RFC 9110 §5.6.7) and the civil-calendar arithmetic under them. In System/ because every layer reads
// dates: Fetch's headers and signatures, Catalog's listings, FileSystem's attributes.

/// Parsing of HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms.
package enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    /// The same, each as its three bytes in one number, for the fixed form's fast path.
    private static let monthKeys: [UInt32] = months.map { $0.utf8.reduce(0) { $0 << 8 | UInt32($1) } }
    /// As IMF-fixdate writes them: every listed file's date is formatted each time the catalog hands it out.
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since 1970-01-01 UTC, or nil.
    package static func parse(_ text: String) -> Int64? {
        // The form every server writes, read in place: splitting it into fields made three arrays per date, and an
        // open or a lookup after a remount parses its file's date (issue 46: a fifth of a LOOKUP's time).
        if case let fixed?? = text.utf8.withContiguousStorageIfAvailable(parseFixdate) { return fixed }
        return parseFields(text)
    }

    /// The general parse, field by field: every form, and every fixed date the fast path declines.
    static func parseFields(_ text: String) -> Int64? {
        // On the UTF-8 bytes, with no String made per field: a date comes with every response and listing line.
        let fields = text.utf8.split(whereSeparator: { $0 == 0x20 || $0 == 0x2C || $0 == 0x2D })
        // IMF: Sun 06 Nov 1994 08:49:37 GMT; RFC 850: Sunday 06 Nov 94 08:49:37 GMT; asctime: Sun Nov 6 08:49:37 1994
        let day: Int?, month: Int?, year: Int?, time: Substring.UTF8View
        if fields.count == 6, fields[5].elementsEqual("GMT".utf8) {
            day = number(fields[1]); month = monthIndex(fields[2]); time = fields[4]
            // RFC 850's two-digit years; a year written with four digits is that year, even one below 100.
            year = number(fields[3]).map { fields[3].count <= 2 ? ($0 < 70 ? 2000 + $0 : 1900 + $0) : $0 }
        } else if fields.count == 5 {
            day = number(fields[2]); month = monthIndex(fields[1]); time = fields[3]
            year = number(fields[4])
        } else {
            return nil
        }
        let clock = time.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false).map(number)
        // Bounded before any arithmetic: a server's `99999999999999999:00:00` would overflow it and stop the mount.
        guard let day, let month, let year, clock.count == 3, let hour = clock[0], let minute = clock[1],
              let second = clock[2], (1...31).contains(day), (0...9999).contains(year),
              (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second) else { return nil }
        return daysSinceEpoch(year: year, month: month + 1, day: day) * 86_400
            + Int64(hour * 3600 + minute * 60 + second)
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, 29 bytes) read at its fixed places; nil for anything else,
    /// which the general parse then reads (it gives the same answer for every date this one accepts).
    private static func parseFixdate(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard bytes.count == 29 else { return nil }
        func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
        func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for index in start..<(start + count) {
                let byte = bytes[index]
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        let space = UInt8(ascii: " "), colon = UInt8(ascii: ":")
        guard isLetter(bytes[0]), isLetter(bytes[1]), isLetter(bytes[2]), bytes[3] == UInt8(ascii: ","),
              bytes[4] == space, bytes[7] == space, bytes[11] == space, bytes[16] == space, bytes[19] == colon,
              bytes[22] == colon, bytes[25] == space, bytes[26] == UInt8(ascii: "G"), bytes[27] == UInt8(ascii: "M"),
              bytes[28] == UInt8(ascii: "T"),
              let day = digits(5, 2), let year = digits(12, 4), let hour = digits(17, 2), let minute = digits(20, 2),
              let second = digits(23, 2)
        else { return nil }
        let key = UInt32(bytes[8] | 0x20) << 16 | UInt32(bytes[9] | 0x20) << 8 | UInt32(bytes[10] | 0x20)
        guard isLetter(bytes[8]), isLetter(bytes[9]), isLetter(bytes[10]), let month = monthKeys.firstIndex(of: key),
              (1...31).contains(day), (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second)
        else { return nil }
        return daysSinceEpoch(year: year, month: month + 1, day: day) * 86_400
            + Int64(hour * 3600 + minute * 60 + second)
    }

    /// The decimal number of 1 to 9 ASCII digits `field` spells, or nil (longer ones are no field of a date).
    private static func number(_ field: Substring.UTF8View) -> Int? {
        guard (1...9).contains(field.count) else { return nil }
        var value = 0
        for byte in field {
            guard (0x30...0x39).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// 0 for "Jan" (any case) to 11 for "Dec", or nil.
    private static func monthIndex(_ field: Substring.UTF8View) -> Int? {
        guard field.count == 3 else { return nil }
        let lower = field.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        return months.firstIndex { $0.utf8.elementsEqual(lower) }
    }

    /// `seconds` since 1970 as an IMF-fixdate: `Mon, 23 Nov 2026 10:00:00 GMT`.
    package static func format(_ seconds: Int64) -> String {
        let date = civil(seconds)
        let weekday = weekdays[Int(((date.days % 7) + 7) % 7)]
        if (1000...9999).contains(date.year) {
            // Every date a server writes: its 29 bytes in place, not ten strings joined (`ls -l` of a million
            // listed files formats each file's date).
            var bytes = [UInt8]()
            bytes.reserveCapacity(29)
            func digits(_ value: Int64, _ count: Int) {
                var divisor: Int64 = 1
                for _ in 1..<count { divisor *= 10 }
                while divisor > 0 {
                    bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                    divisor /= 10
                }
            }
            bytes += weekday.utf8
            bytes += ", ".utf8
            digits(date.day, 2)
            bytes.append(UInt8(ascii: " "))
            bytes += monthNames[Int(date.month - 1)].utf8
            bytes.append(UInt8(ascii: " "))
            digits(date.year, 4)
            bytes.append(UInt8(ascii: " "))
            digits(date.hour, 2)
            bytes.append(UInt8(ascii: ":"))
            digits(date.minute, 2)
            bytes.append(UInt8(ascii: ":"))
            digits(date.second, 2)
            bytes += " GMT".utf8
            return String(decoding: bytes, as: UTF8.self)
        }
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        // IMF-fixdate's year is four digits: year 26 written "26" would read back as 2026.
        let year = date.year
        let fourDigitYear = year >= 0 && year < 1000 ? String("000\(year)".suffix(4)) : "\(year)"
        return "\(weekday), \(two(date.day)) \(monthNames[Int(date.month - 1)]) \(fourDigitYear) "
            + "\(two(date.hour)):\(two(date.minute)):\(two(date.second)) GMT"
    }

    /// The UTC calendar date and clock time `seconds` after 1970-01-01 (proleptic Gregorian), and the whole days
    /// since then (negative before 1970). Month and day count from 1.
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]

    package static func civil(_ seconds: Int64)
        -> (year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64, days: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let clock = seconds - days * 86_400
        // Civil date from days (Howard Hinnant's algorithm, inverted).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, clock / 3600, clock % 3600 / 60, clock % 60, days)
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
    package static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64 {
        let shiftedYear = Int64(month <= 2 ? year - 1 : year)
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
