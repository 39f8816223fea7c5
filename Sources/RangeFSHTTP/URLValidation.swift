import CCurl
import RangeFSFetch

/// Checks a URL before any request, so a bad one is reported as malformed or unsupported instead of as a
/// network failure.
public enum URLValidation {
    public static func validate(_ url: String) throws(FetchError) {
        guard let schemeEnd = url.firstRange(of: "://") else {
            if let colon = url.firstIndex(of: ":"), url[..<colon].allSatisfy(\.isLetter), !url[..<colon].isEmpty {
                throw .unsupportedScheme(String(url[..<colon]).lowercased())
            }
            throw .malformedURL("no scheme://")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(scheme) }
        guard let handle = curl_url() else { throw .malformedURL("cannot parse") }
        defer { curl_url_cleanup(handle) }
        let code = curl_url_set(handle, CURLUPART_URL, url, 0)
        guard code == CURLUE_OK else {
            // In the path, query or fragment (not the host), such a character only needs encoding.
            let rest = url[schemeEnd.upperBound...]
            let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
            if let unsafe = url[pathStart...].unicodeScalars.first(where: mustBeEncoded) {
                let encoded = String(unsafe).utf8.map { "%" + String($0, radix: 16, uppercase: true).leftPadded(2) }
                let shown = unsafe == " " ? "a raw space" : unsafe.value < 0x20 || unsafe.value == 0x7F
                    ? "a control character" : "'\(unsafe)'"
                throw .needsPercentEncoding(character: shown, encoded: encoded.joined())
            }
            throw .malformedURL(String(cString: curl_url_strerror(code)))
        }
        var host: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else {
            throw .malformedURL("no host")
        }
        defer { curl_free(host) }
        if host.pointee == 0 { throw .malformedURL("no host") }
    }
}

/// Characters that a URL cannot hold unencoded (RFC 3986: spaces, controls, and the excluded `"<>\^`{|}`).
private func mustBeEncoded(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value <= 0x20 || scalar.value == 0x7F || "\"<>\\^`{|}".unicodeScalars.contains(scalar)
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
