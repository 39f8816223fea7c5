// What the user names to mount: URLs on the command line or in list files, each optionally `NAME=URL`, and the
// byte sizes the options take.

import ArgumentParser
import Foundation

/// One thing to mount: a URL and, optionally, the name the user chose for it.
struct MountSource: Equatable, Sendable {
    var url: String
    var name: String?

    init(url: String, name: String? = nil) {
        self.url = url
        self.name = name
    }

    /// Parses `URL` or `NAME=URL`. The text is split at the first `=` only when what precedes it contains no
    /// `/` or `:` and what follows it has a scheme, so a URL with `=` in its query stays whole.
    init(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
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
    static func parseList(_ text: String) -> [MountSource] {
        text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            .map(MountSource.init(parsing:))
    }
}

/// Sizes such as `64K`, `1M`, `2G` or plain bytes (powers of 1024).
enum ByteSize {
    static func parse(_ text: String) -> UInt64? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).uppercased()
        let units: [(String, UInt64)] = [("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30),
                                         ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1)]
        for (suffix, multiplier) in units where trimmed.hasSuffix(suffix) {
            guard let value = UInt64(trimmed.dropLast(suffix.count)) else { return nil }
            return value.multipliedReportingOverflow(by: multiplier).overflow ? nil : value * multiplier
        }
        return UInt64(trimmed)
    }

    /// `bytes` in the shortest exact form `parse` reads back: `1G`, `64K`, or plain bytes.
    static func format(_ bytes: UInt64) -> String {
        for (suffix, multiplier) in [("G", UInt64(1) << 30), ("M", 1 << 20), ("K", 1 << 10)]
        where bytes >= multiplier && bytes % multiplier == 0 {
            return "\(bytes / multiplier)\(suffix)"
        }
        return String(bytes)
    }
}

/// A size option's value (`--readahead 32M`).
struct ByteCount: ExpressibleByArgument, Equatable, CustomStringConvertible {
    var bytes: UInt64

    init(_ bytes: UInt64) { self.bytes = bytes }
    init(_ bytes: Int) { self.bytes = UInt64(bytes) }

    init?(argument: String) {
        guard let bytes = ByteSize.parse(argument) else { return nil }
        self.bytes = bytes
    }

    var description: String { ByteSize.format(bytes) }
    var defaultValueDescription: String { description }
}
