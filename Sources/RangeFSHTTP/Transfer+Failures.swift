// How libcurl's result codes become rangefs's errors, and which of them a proxy of the chain is blamed for.

import CCurl
import Glibc
import RangeFSFetch

extension Transfer {
    /// Failures that, through a proxy, are the proxy's: no connection, a timeout, a cut or empty answer.
    static let proxyFailures = Set([
        CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_PROXY, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR,
        CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_PROXY,
    ].map(\.rawValue))

    /// The error for libcurl's `code`; `proxy` is the proxy the request went through, if any, so that a failure to
    /// reach it names it and not the origin.
    static func fetchError(_ code: CURLcode, osErrno: Int32, message: String, proxy: String? = nil) -> FetchError {
        let detail = message.isEmpty ? String(cString: curl_easy_strerror(code)) : message
        if let proxy, code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_PROXY
            || code == CURLE_OPERATION_TIMEDOUT && detail.contains("onnect")
            || detail.lowercased().contains("proxy") {
            return .proxy(proxy, osErrno == ECONNREFUSED ? "connection refused" : detail)
        }
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION: return .certificate(detail)
        case CURLE_SSL_CERTPROBLEM: return .clientCertificate(detail)
        case CURLE_SSL_CACERT_BADFILE: return .caCertificates(detail)
        case CURLE_COULDNT_CONNECT:
            return osErrno == ECONNREFUSED ? .connectionRefused : .transport(detail)
        case CURLE_COULDNT_RESOLVE_HOST: return .hostNotFound
        case CURLE_OPERATION_TIMEDOUT: return .timedOut
        case CURLE_URL_MALFORMAT: return .malformedURL(detail)
        case CURLE_UNSUPPORTED_PROTOCOL: return .unsupportedScheme(detail)
        default: return .transport(detail)
        }
    }
}
