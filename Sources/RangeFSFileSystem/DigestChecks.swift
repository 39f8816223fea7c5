// End-to-end digests: a complete file is checked against the first digest found, in this order:
//   1. the one the user gave (`--checksum sha256=HEX`, `sha256=HEX` on a list-file line, `rangefs add URL sha256=HEX`);
//   2. the one its server announced in `Repr-Digest` (RFC 9530) or `Digest` (RFC 3230), asked for by every probe;
//   3. for a file of a mounted web directory, the line for it in `NAME.sha256`, `SHA256SUMS` or `SHA512SUMS`
//      beside it (sha256sum's format, or BSD's `SHA256 (NAME) = HEX`). Each sums file costs one request, once.
//
// The check runs once the whole file is durable (the store's report `EntryEvent.completed`), and when a complete file that was never
// checked is opened; it hashes the data file on the checks' own queue, never on a reader's path (CacheEntry+Digest).
// A mismatch drops every block and fetches the file again once, each block from another mirror than the one that
// served it (MirrorSet.beginRefetch), in the background. If the refetched file mismatches too, the entry serves
// nothing: its opens and reads fail with EIO, status says `error`, and the log names the URL, the digest
// expected and the one computed. The verdict is kept in the entry's `digest` record, across mounts.

import Dispatch
import RangeFSCache
import RangeFSCatalog
import RangeFSSystem

/// A digest a file is expected to have, and where it was found (for status and the log).
struct ExpectedDigest: Sendable, Equatable {
    var digest: ContentDigest
    var origin: String
}

/// What the digest checks keep: the digests the user gave, the sums files read, and the checks under way.
final class DigestChecks: Sendable {
    /// The queue the hashes run on: one at a time, at utility priority.
    let queue = DispatchQueue(label: "rangefs.digest", qos: .utility)
    /// Digests the user gave, by URL.
    let given = LockedBox<[String: ContentDigest]>([:])
    /// Sums files by URL: their digests by file name once read, or the callers waiting for the one request.
    let sums = LockedBox<[String: SumsFile]>([:])
    /// The entries (by folder) being checked now.
    let running = LockedBox<Set<String>>([])

    enum SumsFile {
        case loading([@Sendable ([FileName: ContentDigest]) -> Void])
        case loaded([FileName: ContentDigest])
        /// The read failed at this time (monotonic seconds); tried again after `sumsRetry`.
        case failed(Double)
    }

    /// Whether `entry` is being checked now: its blocks may be dropped if it mismatches.
    func isChecking(_ entry: CacheEntry) -> Bool {
        running.withLock { $0.contains(entry.directory) }
    }

    /// Seconds before a sums file that could not be read is asked for again.
    static let sumsRetry = 60.0

    /// The largest sums file read: a distribution's SHA256SUMS holds a few hundred lines.
    static let sumsLimit = 16 << 20

    /// The names of the sums files that may hold the digest of the file `name`, most specific first.
    static func sumsNames(for name: String) -> [String] {
        [name + ".sha256", name + ".sha512", "SHA256SUMS", "SHA512SUMS"]
    }

    /// The digests a sums file lists, by file name: `HEX  NAME` or `HEX *NAME` (sha256sum), `SHA256 (NAME) = HEX`
    /// (BSD); a file that holds only `HEX` gives it for `fallbackName`. A leading `./` is dropped from names.
    /// Names are keys by their bytes: the NFC and NFD spellings of a name are two files with two digests.
    static func parseSums(_ text: String, fallbackName: String) -> [FileName: ContentDigest] {
        var found: [FileName: ContentDigest] = [:]
        func add(_ hex: Substring, _ name: Substring) {
            guard let bytes = ContentDigest.bytes(hex: String(hex)) else { return }
            let algorithm: DigestAlgorithm? = bytes.count == 32 ? .sha256 : bytes.count == 64 ? .sha512 : nil
            guard let algorithm, let digest = ContentDigest(algorithm: algorithm, bytes: bytes) else { return }
            var name = name
            if name.hasPrefix("./") { name = name.dropFirst(2) }
            found[FileName(String(name))] = digest
        }
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            if let open = line.firstIndex(of: "("), let close = line.lastIndex(of: ")"), open < close,
               let equals = line[close...].firstIndex(of: "=") {
                add(line[line.index(after: equals)...].trimmingWhitespace()[...],
                    line[line.index(after: open)..<close])
                continue
            }
            let parts = line.split(maxSplits: 1, whereSeparator: { $0 == " " || $0 == "\t" })
            if parts.count == 2 {
                var name = parts[1].drop(while: { $0 == " " || $0 == "\t" })
                if name.hasPrefix("*") { name = name.dropFirst() }
                add(parts[0], name)
            } else if parts.count == 1 {
                add(parts[0], Substring(fallbackName))
            }
        }
        return found
    }
}
