// Stalls: a request with a `stallTimeout` (one mirror of several) is given up once it has received nothing for that
// long, so the file's sink goes on from its byte on another mirror instead of waiting out libcurl's low-speed
// timeout (20 s, and longer in practice: libcurl averages the speed over the last seconds, so a transfer that was
// fast and then froze stays "fast enough" for a while).
//
// The clock runs only while the server is the one keeping the transfer waiting:
//   - from when the request went out (CURLINFO_PRETRANSFER_TIME): a transfer queued for one of the host's
//     connections, or still connecting, is under the connect timeout, not this one;
//   - not while the transfer is paused by us (background work while a reader waits, a paused file);
//   - not while the engine thread itself was held up (a callback waiting on the disk): nothing was read then.

import CCurl
import Dispatch
import RangeFSFetch
import RangeFSSystem

extension Transfer {
    /// Whether this transfer has gone `stallTimeout` seconds without progress at `now` (uptime nanoseconds).
    /// Engine thread only. `heldUp`: the engine was away since its last check, so no silence is held against it.
    func isStalled(now: UInt64, heldUp: Bool) -> Bool {
        guard let timeout = hop.request?.stallTimeout, !reception.cancelledBySink else { return false }
        if progressAt == 0 {
            var sentAfter: curl_off_t = 0
            rfs_easy_getinfo_off(handle, CURLINFO_PRETRANSFER_TIME_T, &sentAfter)
            if sentAfter > 0 { progressAt = now }
            return false
        }
        if pausedInCallback || heldUp {
            progressAt = now
            return false
        }
        return now > progressAt && Double(now - progressAt) / 1e9 >= timeout
    }

    /// Reports a stalled transfer to its sink (the engine has removed its handle). No proxy is blamed: a proxy
    /// that fails refuses, cuts or times out on its own, while this request was fine until its server fell silent.
    func abandonStalled() {
        let error = FetchError.stalled(hop.request?.stallTimeout ?? 0)
        requestLog?.debug("\(hop.requestLine) failed (\(error.userMessage)) \(Redaction.redact(hop.url))")
        if hop.remembered { session.redirects.forget(hop.originalURL) }
        sink.complete(error: error)
    }
}
