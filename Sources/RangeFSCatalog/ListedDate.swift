// A listing as a check of a cached version (DESIGN.md §3, "A listing is a check when it can be").
//
// A listing states a file's modification time cut down to its precision: nginx's HTML autoindex to the minute
// (`23-Nov-2026 10:00`), nginx's and Caddy's JSON to the second (Caddy's fractions are dropped when read). A
// cached version was answered by the server at F, by the server's own clock (the answer's Date header, to the
// second: `RemoteMetadata.answeredAt`). A change made after that answer leaves a modification time m later than
// it, so m ≥ F, and the listing then states a date D with D ≤ m < D + precision, that is D + precision > F. So a
// listed date whose rounded-up end, D + precision, is ≤ F means no change after F: the cached version, of the
// size the listing states, is the file as the listing found it, and reading that listing was a check of it.
//
// Both dates are the server's clock, never this machine's: a client clock ahead of the server's would make a
// change look older than the fetch. What the rule cannot see, a probe could not see either on the servers whose
// listings state sizes and dates: a file replaced with its old size and an old date set on purpose (`touch -d`,
// `rsync -a`) keeps nginx's and Caddy's ETags too, which are made of the size and the date. Without F (no Date
// header, or a cache entry written before its header kept it) nothing is proved, and the file is checked as
// before. Object stores' listings state each object's ETag, which is checked instead (DirectoryService+Probes).
import RangeFSCache

/// How finely a listing states a file's date: its dates are the file's modification time cut down to this.
package enum ListedPrecision: UInt8, Sendable {
    /// To the second: nginx's and Caddy's JSON, an object store's listing.
    case second
    /// To the minute: nginx's HTML autoindex. Also the precision assumed where a listing says nothing finer.
    case minute

    /// The precision in seconds.
    var seconds: Int64 {
        switch self {
        case .second: 1
        case .minute: 60
        }
    }
}

extension CatalogItem {
    /// Whether this listed file's listing proves `version` (a cached one) current: the listing states its size,
    /// and a date that its Last-Modified falls within to the listing's precision and that, rounded up to that
    /// precision, is no later than when the server answered with it (`answeredAt`; see the top of this file).
    /// False when anything is unknown, or when the version's date falls outside the listed one: then the listing
    /// and the version disagree about something (a date set back on purpose), and the file is checked as before.
    package func listingShowsUnchanged(_ version: RemoteMetadata) -> Bool {
        guard listed, attributesExact, let listedTime, metadata.sizeKnown, version.sizeKnown,
              version.size == metadata.size, let answeredAt = version.answeredAt,
              let modified = version.modificationTime
        else { return false }
        let (end, overflow) = listedTime.addingReportingOverflow(listedPrecision.seconds)
        return !overflow && listedTime <= modified && modified < end && end <= answeredAt
    }
}
