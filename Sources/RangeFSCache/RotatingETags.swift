// Servers whose ETags are no validators (DESIGN.md §4): nodes behind a load balancer that each make their own ETag,
// so the same bytes come with another ETag on each answer. One other ETag for the same length and Last-Modified is
// not enough to say so: the file may have been replaced within the second. It takes a second answer: a third ETag,
// or the cache's own ETag honoured again after the other one was seen. Once a server is known to rotate, every
// file of it is judged by length and Last-Modified at once, and the knowledge is kept in the cache directory
// (`rotating-etags`, one scheme://host:port per line), so a remount does not drop cached files for it.

import Logging
import RangeFSSystem
import Synchronization

/// What one answer with another ETag (same length and Last-Modified) says about a cached version.
package enum ETagVerdict: Equatable {
    /// The first other ETag seen for it: ask once more before deciding.
    case askAgain
    /// The server rotates its ETags: this is no change.
    case rotates
    /// The same other ETag twice, and nothing of the cached version in between: the file was replaced.
    case changed
}

/// The servers of a cache found to rotate their ETags.
final class RotatingETags: Sendable {
    private let path: String
    private let origins: LockedBox<Set<String>>
    private let logger: Logger

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
        let text = ((try? FileSystemCalls.readSmallFile(path, limit: 1 << 20)) ?? nil)  // try?: none kept yet
            .map { String(decoding: $0, as: UTF8.self) } ?? ""
        origins = LockedBox(Set(text.split(separator: "\n").map(String.init)))
    }

    /// Whether the server of `url` is known to rotate its ETags.
    func contains(_ url: String) -> Bool {
        guard let origin = Self.origin(of: url) else { return false }
        return origins.withLock { $0.contains(origin) }
    }

    /// Records that the server of `url` rotates its ETags; returns its origin the first time, to say so once.
    func insert(_ url: String) -> String? {
        guard let origin = Self.origin(of: url) else { return nil }
        let all = origins.withLock { set -> [String]? in set.insert(origin).inserted ? set.sorted() : nil }
        guard let all else { return nil }
        do {
            try FileSystemCalls.replaceAtomically(path, with: Array((all.joined(separator: "\n") + "\n").utf8))
        } catch {
            logger.warning("cannot keep the list of servers that rotate ETags in \(path): \(error)")
        }
        return origin
    }

    /// `scheme://host:port` of a URL (without any login), lowercased.
    static func origin(of url: String) -> String? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        var authority = rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return (url[..<schemeEnd.upperBound] + authority).lowercased()
    }
}
