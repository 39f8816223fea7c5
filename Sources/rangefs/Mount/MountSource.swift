// What the user names to mount: URLs on the command line or in list files, each optionally `NAME=URL`, with its
// mirrors after it (`NAME=URL MIRROR1 MIRROR2`), and the byte sizes the options take.

import ArgumentParser
import Foundation
import RangeFSCore

/// One thing to mount: a URL, other URLs of the same file (its mirrors) and, optionally, the name the user chose.
struct MountSource: Equatable, Sendable {
    var url: String
    var name: String?
    var mirrors: [String] = []

    init(url: String, name: String? = nil, mirrors: [String] = []) {
        self.url = url
        self.name = name
        self.mirrors = mirrors
    }

    /// `text` as a URL followed by its mirrors, separated by spaces or tabs (a URL holds neither unencoded):
    /// several URLs only when every part is one, so a lone URL with a raw space still gets the message that says
    /// to percent-encode it.
    private static func urls(in text: String) -> (url: String, mirrors: [String]) {
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard parts.count > 1, parts.allSatisfy({ $0.contains("://") }) else { return (text, []) }
        return (parts[0], Array(parts.dropFirst()))
    }

    /// Parses `URL` or `NAME=URL`. The text is split at the first `=` when what precedes it is not itself the
    /// start of a URL (no `://`) and what follows it is one, so a URL with `=` in its query stays whole. A name
    /// that cannot name a file (`a/b`, `..`) is an error that says so.
    ///
    /// In a list file (`inFolders`), a NAME may place the file in folders, `movies/a.mp4=URL`; each part of it
    /// must be a plain name.
    init(parsing text: String, inFolders: Bool = false) throws(MountSourceError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let equals = trimmed.firstIndex(of: "=") {
            let name = String(trimmed[..<equals])
            let rest = String(trimmed[trimmed.index(after: equals)...])
            if !name.isEmpty, !name.contains("://"), rest.contains("://") {
                let parts = inFolders ? name.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                    : [name]
                let problem = parts.contains(where: \.isEmpty) ? "it has an empty part; write folder/name"
                    : parts.lazy.compactMap(EntryNaming.problem(withExplicitName:)).first
                if let problem {
                    throw MountSourceError(
                        "'\(Redaction.redact(trimmed))': the name '\(name)' cannot name a file (\(problem)); give a "
                        + "plain file name before '=', or leave 'NAME=' out to name the file after its URL")
                }
                let (url, mirrors) = Self.urls(in: rest)
                self.init(url: url, name: name, mirrors: mirrors)
                return
            }
        }
        let (url, mirrors) = Self.urls(in: trimmed)
        self.init(url: url, mirrors: mirrors)
    }

    /// Parses a list file: one `URL` or `NAME=URL` per line, each optionally followed by mirrors of the same file
    /// (`NAME=URL MIRROR...`); blank lines and lines starting with `#` are skipped.
    /// An error names the line.
    static func parseList(_ text: String, path: String = "list") throws(MountSourceError) -> [MountSource] {
        var sources: [MountSource] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            do {
                sources.append(try MountSource(parsing: trimmed, inFolders: true))
            } catch {
                throw MountSourceError("\(path) line \(number + 1): \(error.message)")
            }
        }
        return sources
    }
}

/// Why a source cannot be mounted, as one line.
struct MountSourceError: Error, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
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
