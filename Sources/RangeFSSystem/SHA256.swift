// SHA-256 (FIPS 180-4) of small inputs, through libcrypto's one-shot `EVP_Digest`: it names cache entry folders,
// kept listings and control sockets after their URL or mount point, and marks redacted query values. libcrypto is
// linked already for whole-file digests (ContentDigest.swift) and HMAC (HMAC.swift), so a hand-written copy of the
// algorithm would be one more thing to get right for nothing. The names it makes are on-disk contract: a test pins
// one (ChecksumTests), so a change of algorithm or encoding cannot orphan every cached entry.

import CCrypto

/// SHA-256 digests of small inputs such as URLs.
package enum SHA256 {
    /// The 32-byte digest of `message`.
    package static func digest(_ message: some Collection<UInt8>) -> [UInt8] {
        // An empty array may have no storage: EVP_Digest is handed a real address even for zero bytes, as
        // HMACSHA256 does for libcrypto's HMAC().
        let bytes = message.isEmpty ? [0] : Array(message)
        let count = message.isEmpty ? 0 : bytes.count
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        // SAFETY: `bytes` is valid for the call, which reads `count` (at most `bytes.count`) bytes of it.
        let result = bytes.withUnsafeBytes { input in
            // SAFETY: `output` holds the 32 bytes SHA-256 writes; the pointer is used only inside the call.
            output.withUnsafeMutableBufferPointer { digest in
                EVP_Digest(input.baseAddress, count, digest.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest fails only when libcrypto cannot allocate its context, which nothing here can mend.
        guard result == 1, length == 32 else { fatalError("SHA-256 failed: out of memory") }
        return output
    }

    /// The digest as lowercase hexadecimal.
    package static func hexDigest(_ message: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest(Array(message.utf8)).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] },
                      as: UTF8.self)
    }
}
