/// Why the cache could not be opened or used.
public enum CacheError: Error, Sendable, CustomStringConvertible {
    case system(SystemError)
    /// Another process holds the cache directory's lock.
    case locked(path: String, holder: String)

    public var description: String {
        switch self {
        case .system(let error): error.description
        case .locked(let path, let holder):
            "cache directory \(path) is in use by another rangefs (\(holder)); unmount it first or pass another --cache DIR"
        }
    }
}
