// What a response must state before any byte of its body is kept (DESIGN.md §4). rangefs asks for
// `Accept-Encoding: identity`, so a body in any other encoding is not the file's bytes: CDNs and proxies that
// compress on the fly send gzip for a Range request, with a Content-Range that describes the file and a body that
// does not. And a body is only as long as its headers say: a 206 whose Content-Length differs from its
// Content-Range's span, or a 200 whose Content-Length is not the file's size, carries other bytes than the ones
// named. Such an answer is refused whole, before its first body byte, so none of it reaches a block, a reader or
// the disk; the CRC32C a block gets is taken only over bytes that passed here.
//
// A body whose length no header states (chunked, or HTTP/2 without Content-Length) can only be judged at its
// end: `statesItsLength` tells the sink to hold such a body back until it ended where its Content-Range said.
//
// A part is one range of the file's bytes: a `multipart/byteranges` answer, even one whose top-level Content-Range
// and Content-Length match the request, carries its parts' boundaries and headers in its body, and is refused the
// same way.

extension ResponseHead {
    /// The Content-Encoding, if the body is in any encoding other than identity.
    var foreignEncoding: String? {
        guard let value = self["content-encoding"] else { return nil }
        let codings = value.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? nil : codings.joined(separator: ", ")
    }

    /// Whether the body's length is fixed by a Content-Length that framing does not override: HTTP/1.1 chunked
    /// framing wins over Content-Length (RFC 9112 §6.3), so a chunked body states nothing.
    var statesItsLength: Bool {
        guard self["content-length"] != nil else { return false }
        return !(self["transfer-encoding"]?.lowercased().contains("chunked") ?? false)
    }

    /// Why this response's body must not be kept, when its body should be `length` bytes (nil: any length);
    /// nil when nothing in its head speaks against it.
    func untrustedBody(expectedLength length: UInt64?) -> FetchError? {
        if let encoding = foreignEncoding {
            return .untrustedBody("its body is \(encoding)-encoded (Content-Encoding: \(encoding)) although identity was asked for")
        }
        // One range was asked for, so a part is data only as a single part: a multipart/byteranges body (or any
        // multipart/*) holds boundaries and part headers between the bytes, whatever its top-level Content-Range
        // and length say.
        if length != nil, let type = self["content-type"], type.trimmingWhitespace().lowercased().hasPrefix("multipart/") {
            return .untrustedBody("its body is \(type.prefix(40)) (several parts with boundaries) where one range was asked for")
        }
        if let length, statesItsLength, let stated = self["content-length"] {
            guard let declared = UInt64(stated.trimmingWhitespace()) else {
                return .untrustedBody("its Content-Length (\(stated)) is no number")
            }
            if declared != length {
                return .untrustedBody("its Content-Length is \(declared) bytes where its range holds \(length)")
            }
        }
        return nil
    }
}
