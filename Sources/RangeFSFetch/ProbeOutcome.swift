// What a probe's answer means for a file (DESIGN.md §8), decided in one place for the mount, for listed files and
// for `rangefs add`: a URL whose server cannot be reached is served from its cache entry when it has one; a 404 or
// 410 means the file is gone; any other failure keeps a saved URL in the saved set (a 403 may be an expired token),
// and only `rangefs rm` or a gone file drops it.
import RangeFSCache

/// The verdict on one probed URL.
public enum ProbeOutcome: Equatable, Sendable {
    /// The server answered: mount it with these attributes and validators.
    case online(RemoteMetadata)
    /// The server cannot be reached, and the cache holds this version: serve it from the cache.
    case offline(RemoteMetadata, reason: String)
    /// The URL is a directory (its server redirected it to the URL with a `/`).
    case directory(String)
    /// The server says the file is gone (404, 410).
    case gone(FetchError)
    /// It cannot be mounted now; `keepSaved` says whether it stays in the saved set.
    case failed(FetchError, keepSaved: Bool)

    /// Judges `result` for a URL: `stored` gives what its cache entry says (read only when needed), and
    /// `wasSaved` whether it was in the saved set.
    public static func judge(_ result: Result<RemoteMetadata, FetchError>, stored: () -> RemoteMetadata?,
                             wasSaved: Bool) -> ProbeOutcome {
        switch result {
        case .success(let metadata): return .online(metadata)
        case .failure(.isDirectory(let url)): return .directory(url)
        case .failure(let error) where error.isGone: return .gone(error)
        case .failure(let error):
            if error.isOriginUnreachable, let cached = stored() { return .offline(cached, reason: error.userMessage) }
            return .failed(error, keepSaved: error.isOriginUnreachable || wasSaved)
        }
    }
}
