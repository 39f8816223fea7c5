import CCurl
import RangeFSCore

/// Checks a URL before any request, so a bad one is reported as malformed or unsupported instead of as a
/// network failure.
public enum URLValidation {
    public static func validate(_ url: String) throws(FetchError) {
        guard let schemeEnd = url.range(of: "://") else {
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
        guard code == CURLUE_OK else { throw .malformedURL(String(cString: curl_url_strerror(code))) }
        var host: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else {
            throw .malformedURL("no host")
        }
        defer { curl_free(host) }
        if host.pointee == 0 { throw .malformedURL("no host") }
    }
}
