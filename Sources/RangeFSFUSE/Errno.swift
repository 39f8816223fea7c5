import CFUSE
import RangeFSCore

/// The one place where filesystem errors become errno values for the kernel.
extension FileSystemError {
    var errno: Int32 {
        switch self {
        case .notFound: ENOENT
        case .notADirectory: ENOTDIR
        case .isADirectory: EISDIR
        case .noSuchAttribute: ENODATA
        case .attributeNotSupported: EOPNOTSUPP
        case .bufferTooSmall: ERANGE
        case .badHandle: EBADF
        case .stale: ESTALE
        case .noSpace: ENOSPC
        case .interrupted: EINTR
        case .readOnly: EROFS
        case .invalidArgument: EINVAL
        case .io: EIO
        }
    }
}
