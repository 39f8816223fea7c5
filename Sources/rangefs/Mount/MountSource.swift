// What the user names to mount: URLs on the command line or in list files, each optionally `NAME=URL`, with its
// mirrors after it (`NAME=URL MIRROR1 MIRROR2`) and its digest last (`NAME=URL sha256=HEX`), and the byte sizes
// the options take.

import ArgumentParser
import FoundationEssentials
import RangeFSCatalog
import RangeFSPlatform
import RangeFSSystem

/// One thing to mount: a URL, other URLs of the same file (its mirrors) and, optionally, the name the user chose.
struct MountSource: Equatable, Sendable {
    var url: String
    var name: String?
    var mirrors: [String] = []
    /// The file's digest as the user gave it (`sha256=HEX`), checked when the file is complete.
    var checksum: String?
    /// A list-file line ending in `archives`: this file (or the archives of this directory URL) shows as a folder
    /// of its members, as `--archives` shows every archive.
    var archives = false

    init(url: String, name: String? = nil, mirrors: [String] = [], checksum: String? = nil) {
        self.url = url
        self.name = name
        self.mirrors = mirrors
        self.checksum = checksum
    }

    /// Whether `text` is a digest as `--checksum` and list files take it: `sha256=` and 64 hex digits, or
    /// `sha512=` and 128.
    static func isChecksum(_ text: String) -> Bool {
        let lower = text.lowercased()
        for (prefix, digits) in [("sha256=", 64), ("sha512=", 128)] where lower.hasPrefix(prefix) {
            let hex = lower.dropFirst(prefix.count)
            return hex.count == digits && hex.allSatisfy(\.isHexDigit)
        }
        return false
    }

    /// The error for a `--checksum` value or a list-file token that looks like a digest but is not one.
    static func checksumProblem(_ text: String) -> String {
        "'\(text)' is not a digest rangefs can check; write sha256= followed by the 64 hex digits of the file's "
            + "SHA-256 (or sha512= and 128 digits), as sha256sum prints them"
    }

    /// `text` as a URL followed by its mirrors and, last, optionally its digest, separated by spaces or tabs (a URL
    /// holds neither unencoded): several parts only when every other part is a URL, so a lone URL with a raw space
    /// still gets the message that says to percent-encode it.
    private static func urls(in text: String) throws(MountSourceError) -> (url: String, mirrors: [String], checksum: String?) {
        var parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var checksum: String?
        if parts.count > 1, let last = parts.last, !last.contains("://"),
           last.lowercased().hasPrefix("sha256") || last.lowercased().hasPrefix("sha512") {
            guard isChecksum(last) else { throw MountSourceError(checksumProblem(last)) }
            checksum = last.lowercased()
            parts.removeLast()
        }
        guard parts.count > 1, parts.allSatisfy({ $0.contains("://") }) else {
            return (checksum == nil ? text : parts.joined(separator: " "), [], checksum)
        }
        return (parts[0], Array(parts.dropFirst()), checksum)
    }

    /// Parses `URL` or `NAME=URL`. The text is split at the first `=` when what precedes it is not itself the
    /// start of a URL (no `://`) and what follows it is one, so a URL with `=` in its query stays whole. A name
    /// that cannot name a file (`a/b`, `..`) is an error that says so.
    ///
    /// In a list file (`inFolders`), a NAME may place the file in folders, `movies/a.mp4=URL`; each part of it
    /// must be a plain name.
    init(parsing text: String, inFolders: Bool = false) throws(MountSourceError) {
        let trimmed = text.trimmed()
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
                let (url, mirrors, checksum) = try Self.urls(in: rest)
                self.init(url: url, name: name, mirrors: mirrors, checksum: checksum)
                return
            }
        }
        let (url, mirrors, checksum) = try Self.urls(in: trimmed)
        self.init(url: url, mirrors: mirrors, checksum: checksum)
    }

    /// Parses one line as a list file holds it (and `rangefs add` takes it): what `init(parsing:inFolders:)` reads,
    /// optionally followed by the word `archives`.
    init(parsingLine text: String, inFolders: Bool = false) throws(MountSourceError) {
        let trimmed = text.trimmed()
        // `archives` last, after the URLs and the digest: a word, never a URL or a digest.
        let parts = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
        let archives = parts.count > 1 && parts.last == "archives"
        try self.init(parsing: archives ? parts.dropLast().joined(separator: " ") : trimmed, inFolders: inFolders)
        self.archives = archives
    }

    /// Parses a list file: one `URL` or `NAME=URL` per line, each optionally followed by mirrors of the same file
    /// (`NAME=URL MIRROR...`), its digest (`sha256=HEX`) and `archives`; blank lines and lines starting with `#`
    /// are skipped.
    /// An error names the line.
    static func parseList(_ text: String, path: String = "list") throws(MountSourceError) -> [MountSource] {
        var sources: [MountSource] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmed()
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            do {
                sources.append(try MountSource(parsingLine: trimmed, inFolders: true))
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
        let trimmed = text.trimmed().uppercased()
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
