// The web page's secret (`rangefs ui`): 32 random bytes from /dev/urandom in hex, as Jupyter's token. It is printed
// once, in the URL on stdout, and kept in a 0600 file in the user's private folder of control sockets (a script
// can read it there); the file goes when the command ends. The browser spends it into an HttpOnly, SameSite=Strict
// cookie on its first visit; actions must also carry it in a header, which no other site's page can set.

import Glibc

/// The token a request must show.
struct UIToken: Sendable {
    /// 64 hex digits.
    let value: String

    /// A new token from /dev/urandom; throws the one-line reason when it cannot read it.
    static func random() throws -> UIToken {
        let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CLIError("cannot read /dev/urandom for the page's token: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 32)
        var got = 0
        while got < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + got, $0.count - got) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw CLIError("cannot read /dev/urandom for the page's token") }
            got += count
        }
        let digits = Array("0123456789abcdef".utf8)
        return UIToken(value: String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] },
                                     as: UTF8.self))
    }

    /// Whether `candidate` is the token, in time that does not depend on where they differ.
    func matches(_ candidate: String?) -> Bool {
        guard let candidate else { return false }
        let given = Array(candidate.utf8), expected = Array(value.utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (left, right) in zip(given, expected) { difference |= left ^ right }
        return difference == 0
    }

    /// Writes the token to `path`, a new file of mode 0600 (an old one of a killed `rangefs ui` is replaced).
    func save(to path: String) throws {
        unlink(path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw CLIError("cannot write the page's token to \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let line = Array((value + "\n").utf8)
        guard line.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == line.count else {
            throw CLIError("cannot write the page's token to \(path): \(String(cString: strerror(errno)))")
        }
    }
}
