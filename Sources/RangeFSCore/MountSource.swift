/// One thing to mount: a URL and, optionally, the name the user chose for it.
public struct MountSource: Equatable, Sendable {
    public var url: String
    public var name: String?

    public init(url: String, name: String? = nil) {
        self.url = url
        self.name = name
    }

    /// Parses `URL` or `NAME=URL`. The text is split at the first `=` only when what precedes it contains no
    /// `/` or `:` and what follows it has a scheme, so a URL with `=` in its query stays whole.
    public init(parsing text: String) {
        let trimmed = text.trimmingWhitespace()
        if let equals = trimmed.firstIndex(of: "=") {
            let name = trimmed[..<equals]
            let rest = trimmed[trimmed.index(after: equals)...]
            if !name.isEmpty, !name.contains("/"), !name.contains(":"), rest.contains("://") {
                self.init(url: String(rest), name: String(name))
                return
            }
        }
        self.init(url: trimmed)
    }

    /// Parses a list file: one `URL` or `NAME=URL` per line; blank lines and lines starting with `#` are skipped.
    public static func parseList(_ text: String) -> [MountSource] {
        text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingWhitespace() }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            .map(MountSource.init(parsing:))
    }
}

/// Sizes such as `64K`, `1M`, `2G` or plain bytes (powers of 1024).
public enum ByteSize {
    public static func parse(_ text: String) -> UInt64? {
        let trimmed = text.trimmingWhitespace().uppercased()
        let units: [(String, UInt64)] = [("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30),
                                         ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1)]
        for (suffix, multiplier) in units where trimmed.hasSuffix(suffix) {
            guard let value = UInt64(trimmed.dropLast(suffix.count)) else { return nil }
            return value.multipliedReportingOverflow(by: multiplier).overflow ? nil : value * multiplier
        }
        return UInt64(trimmed)
    }
}
