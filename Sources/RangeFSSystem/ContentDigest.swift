// End-to-end digests of whole files: SHA-256 and SHA-512 as distributions, dataset sites and RFC 9530 servers
// publish them, computed with libcrypto (which uses the CPU's SHA instructions). The CRC32C of each block guards
// the cache against its own disk; a digest guards the whole file against a source that served other bytes.

import CCrypto

/// A digest algorithm rangefs checks files with.
package enum DigestAlgorithm: String, Sendable, Codable, CaseIterable {
    case sha256, sha512

    /// The digest's length in bytes.
    var length: Int { self == .sha256 ? 32 : 64 }
}

/// A file's expected or computed digest.
package struct ContentDigest: Equatable, Sendable, CustomStringConvertible {
    package var algorithm: DigestAlgorithm
    var bytes: [UInt8]

    package init?(algorithm: DigestAlgorithm, bytes: [UInt8]) {
        guard bytes.count == algorithm.length else { return nil }
        self.algorithm = algorithm
        self.bytes = bytes
    }

    /// `sha256=HEX` or `sha512=HEX` (the form `--checksum` and list files take; `sha-256` and `:` also read).
    package init?(parsing text: String) {
        guard let separator = text.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return nil }
        let name = text[..<separator].lowercased().replacing("-", with: "")
        guard let algorithm = DigestAlgorithm(rawValue: name),
              let bytes = Self.bytes(hex: String(text[text.index(after: separator)...]))
        else { return nil }
        self.init(algorithm: algorithm, bytes: bytes)
    }

    /// The bytes a hexadecimal string spells, or nil if it is not one.
    package static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    package var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// `sha256=HEX`, the form it is given in.
    package var description: String { "\(algorithm.rawValue)=\(hex)" }
}

/// An incremental SHA-256 or SHA-512 over bytes handed in order.
package final class DigestHasher {
    private let context: OpaquePointer
    let algorithm: DigestAlgorithm

    package init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        // Allocation fails only without memory, which nothing here can mend.
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
        self.context = context
        EVP_DigestInit_ex(context, algorithm == .sha256 ? EVP_sha256() : EVP_sha512(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    package func update(_ bytes: [UInt8]) {
        // SAFETY: the buffer is valid for the call, which reads `count` bytes of it.
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything handed in.
    package func finish() -> ContentDigest {
        var output = [UInt8](repeating: 0, count: algorithm.length)
        var length: UInt32 = 0
        // SAFETY: `output` holds the algorithm's whole digest, which is what EVP_DigestFinal_ex writes.
        output.withUnsafeMutableBytes { raw in
            _ = EVP_DigestFinal_ex(context, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
        }
        // The algorithm fixes the length, so `output` has the right size.
        return ContentDigest(algorithm: algorithm, bytes: output)!
    }
}
