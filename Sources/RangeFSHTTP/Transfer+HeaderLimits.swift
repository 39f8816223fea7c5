// How large a response's headers may be. libcurl 7.88 fails a header line longer than its buffer may grow
// (CURL_MAX_HTTP_HEADER, 100 KiB: doubling from 256 bytes, a line past 64 KiB fails) with "Out of memory", which
// told the user nothing (issue 45, case 11); and it sets no bound on the number of lines, each of which this side
// keeps. So a line is refused from 32 KiB on, and the headers from 256 KiB in all, naming the header; a line past
// libcurl's own limit is named by the header before it, the one name known. Real headers are far smaller: nginx
// reads 8 KiB lines (large_client_header_buffers), S3 sends under 2 KiB.

extension Transfer {
    /// The longest header line taken, and the most header bytes of one response.
    static let headerLineLimit = 32 << 10
    static let headerBytesLimit = 256 << 10

    /// Why a response whose header `name` takes `lineBytes` bytes, `totalBytes` with those before it, is refused;
    /// nil if it is not.
    static func headerRefusal(name: String, lineBytes: Int, totalBytes: Int) -> String? {
        guard lineBytes > headerLineLimit || totalBytes > headerBytesLimit else { return nil }
        let shown = String(name.prefix(64).map { $0.isASCII && !$0.isWhitespace ? $0 : "?" })
        if lineBytes > headerLineLimit {
            return "its header \(shown) is \(lineBytes >> 10) KiB long, more than the \(headerLineLimit >> 10) KiB taken"
        }
        if totalBytes > headerBytesLimit {
            return "its headers pass \(headerBytesLimit >> 10) KiB at \(shown), more than any answer needs"
        }
        return nil
    }

    /// Why a response is refused whose header line libcurl would not take (`CURLE_OUT_OF_MEMORY` before the head
    /// was complete); `previous` is the last header it did take.
    static func giantHeaderLine(after previous: String?) -> String {
        let place = previous.map { "the header after \(String($0.prefix(64)))" } ?? "its first header"
        return "\(place) is longer than the 64 KiB libcurl takes (its name is not known)"
    }
}
