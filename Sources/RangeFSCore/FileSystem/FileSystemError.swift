/// What a filesystem operation reports; the FUSE adapter turns each case into one errno.
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
    case noSpace
    case interrupted
    /// Network trouble after retries, a failed server, a timeout.
    case io(String)
}
