import Glibc
import RangeFSCache
import RangeFSSystem

/// What a filesystem operation reports: every answer the FUSE adapter can send, each case one errno (`errno`).
public enum FileSystemError: Error, Sendable, Equatable {
    case notFound
    case notADirectory
    case isADirectory
    case noSuchAttribute
    /// An extended attribute outside the `user.` namespace (security labels, ACLs): not supported.
    case attributeNotSupported
    case bufferTooSmall(needed: Int)
    case badHandle
    /// The file changed on the server since this handle was opened.
    case stale
    /// The cache's disk is full: the file cannot get its cache entry.
    case noSpace
    case interrupted
    /// A write was asked of a read-only file system.
    case readOnly
    /// The kernel's request is not one the file system can take (no file info, a negative offset).
    case invalidArgument
    /// Network trouble after retries, a failed server, a timeout.
    case io(String)
}

extension FileSystemError {
    /// The error a failure to open a file's cache entry shows: `noSpace` for a full cache disk, `io` otherwise.
    static func cacheUnusable(_ error: CacheError) -> FileSystemError {
        if case .system(let system) = error, system.isNoSpace { return .noSpace }
        return .io(error.description)
    }
}

extension FileSystemError {
    /// The one place where the file system's errors become errno values for the kernel.
    public var errno: Int32 {
        let named: Errno = switch self {
        case .notFound: .noEntry
        case .notADirectory: .notADirectory
        case .isADirectory: .isADirectory
        case .noSuchAttribute: .noData
        case .attributeNotSupported: .notSupported
        case .bufferTooSmall: .outOfRange
        case .badHandle: .badDescriptor
        case .stale: .stale
        case .noSpace: .noSpace
        case .interrupted: .interrupted
        case .readOnly: .readOnly
        case .invalidArgument: .invalidArgument
        case .io: .io
        }
        return named.rawValue
    }
}
