import Glibc

/// An errno value with a name: what a system call failed with (`SystemError.errno`), and what the file system
/// answers the kernel with (`FileSystemError.errno`). The core is the only place that spells errno constants.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The errno the calling thread's last failed system call set.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    package static let noEntry = Errno(rawValue: ENOENT)
    package static let notADirectory = Errno(rawValue: ENOTDIR)
    package static let isADirectory = Errno(rawValue: EISDIR)
    package static let noData = Errno(rawValue: ENODATA)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    package static let outOfRange = Errno(rawValue: ERANGE)
    package static let badDescriptor = Errno(rawValue: EBADF)
    package static let stale = Errno(rawValue: ESTALE)
    package static let noSpace = Errno(rawValue: ENOSPC)
    package static let quotaExceeded = Errno(rawValue: EDQUOT)
    package static let interrupted = Errno(rawValue: EINTR)
    package static let readOnly = Errno(rawValue: EROFS)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    package static let io = Errno(rawValue: EIO)
    public static let notPermitted = Errno(rawValue: EPERM)
    public static let notATerminal = Errno(rawValue: ENOTTY)
    package static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    package static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    package static let exists = Errno(rawValue: EEXIST)
    package static let fileTooBig = Errno(rawValue: EFBIG)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)

    /// The system's text for it, as `strerror(3)` gives it.
    public var description: String { String(cString: strerror(rawValue)) }
}
