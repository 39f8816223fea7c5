import Glibc

/// A `sockaddr_un` for `path` (a leading NUL makes an abstract socket) and its length, or nil if it is too long.
public func unixSocketAddress(_ path: String) -> (address: sockaddr_un, length: socklen_t)? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    return (address, socklen_t(MemoryLayout<sa_family_t>.size + bytes.count))
}
