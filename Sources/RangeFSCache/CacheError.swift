/// Why the cache could not be opened or used.
import RangeFSSystem

public enum CacheError: Error, Sendable, CustomStringConvertible {
    case system(SystemError)
    /// Another process holds the cache directory's lock.
    case locked(path: String, holder: String)
    /// The stream of a file without a length ended, and its entry could not be kept at the size found.
    case unsettledSize(url: String, size: UInt64, reason: String)

    public var description: String {
        switch self {
        case .system(let error): error.description
        case .locked(let path, let holder):
            "cache directory \(path) is in use by another rangefs (\(holder)); unmount it first or pass another --cache DIR"
        case .unsettledSize(let url, let size, let reason):
            "\(Redaction.redact(url)): cannot keep it at its size of \(size) bytes: \(reason); it is streamed again from byte 0"
        }
    }
}
