// HMAC-SHA256 (RFC 2104 over SHA-256), the keyed hash of AWS Signature Version 4: object-store requests are
// signed with a key derived through four HMACs from the secret key. libcrypto's one-shot `HMAC()` does it; it is
// not deprecated in OpenSSL 3 (only the HMAC_CTX calls are).

import CCrypto

/// HMAC with SHA-256, through libcrypto.
package enum HMACSHA256 {
    /// The 32-byte authentication code of `message` under `key` (any length: a key longer than SHA-256's 64-byte
    /// block is hashed first, as RFC 2104 says; libcrypto does that).
    package static func authenticate(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        // An empty array may have no storage, and libcrypto 3.0's HMAC() fails (returns null) for a null key even
        // with a zero length (checked with 3.0.19), so both inputs always get a real address.
        let keyBytes = key.isEmpty ? [0] : key
        let messageBytes = message.isEmpty ? [0] : message
        // SAFETY: each buffer is valid for the call; HMAC reads `key.count` and `message.count` bytes of the inputs
        // (never more than they hold) and writes at most EVP_MAX_MD_SIZE of which SHA-256 uses 32, `output`'s size.
        let result = keyBytes.withUnsafeBytes { keyBuffer in
            // SAFETY: see above; the pointer is used only inside the call.
            messageBytes.withUnsafeBufferPointer { messageBuffer in
                // SAFETY: see above; `output` holds the 32 bytes SHA-256's HMAC writes.
                output.withUnsafeMutableBufferPointer { outputBuffer in
                    HMAC(EVP_sha256(), keyBuffer.baseAddress, Int32(key.count), messageBuffer.baseAddress,
                         message.count, outputBuffer.baseAddress, &length)
                }
            }
        }
        // HMAC fails only when libcrypto cannot allocate its context, which nothing here can mend.
        guard result != nil, length == 32 else { fatalError("HMAC-SHA256 failed: out of memory") }
        return output
    }
}
