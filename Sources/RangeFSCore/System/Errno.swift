import Glibc

/// An errno value with a name: what a system call failed with (`SystemError.errno`), and what the file system
/// answers the kernel with (`FileSystemError.errno`). The core is the only place that spells errno constants.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The errno the calling thread's last failed system call set.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    static let noEntry = Errno(rawValue: ENOENT)
    static let notADirectory = Errno(rawValue: ENOTDIR)
    static let isADirectory = Errno(rawValue: EISDIR)
    static let noData = Errno(rawValue: ENODATA)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    static let outOfRange = Errno(rawValue: ERANGE)
    static let badDescriptor = Errno(rawValue: EBADF)
    static let stale = Errno(rawValue: ESTALE)
    static let noSpace = Errno(rawValue: ENOSPC)
    static let quotaExceeded = Errno(rawValue: EDQUOT)
    static let interrupted = Errno(rawValue: EINTR)
    static let readOnly = Errno(rawValue: EROFS)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    static let io = Errno(rawValue: EIO)
    public static let notPermitted = Errno(rawValue: EPERM)
    public static let notATerminal = Errno(rawValue: ENOTTY)
    static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    static let exists = Errno(rawValue: EEXIST)
    static let fileTooBig = Errno(rawValue: EFBIG)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)

    /// The system's text for it, as `strerror(3)` gives it.
    public var description: String { String(cString: strerror(rawValue)) }
}
