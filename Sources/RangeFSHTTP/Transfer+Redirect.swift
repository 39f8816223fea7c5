// Where a redirect points: a Location header made absolute with libcurl's URL parser, which the engine follows
// itself (each hop a Transfer of its own, sent the credentials of its own origin only).

import CCurl

extension Transfer {
    /// `reference` (a Location header) made absolute against `base`; nil if it cannot be.
    static func resolve(_ reference: String, against base: String) -> String? {
        guard let parser = curl_url() else { return nil }
        defer { curl_url_cleanup(parser) }
        guard curl_url_set(parser, CURLUPART_URL, base, 0) == CURLUE_OK,
              curl_url_set(parser, CURLUPART_URL, reference, 0) == CURLUE_OK
        else { return nil }
        var resolved: UnsafeMutablePointer<CChar>?
        guard curl_url_get(parser, CURLUPART_URL, &resolved, 0) == CURLUE_OK, let resolved else { return nil }
        defer { curl_free(resolved) }
        return String(cString: resolved)
    }
}
