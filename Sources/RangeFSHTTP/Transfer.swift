// One libcurl easy handle and the sink its response goes to. libcurl calls back into C function pointers that may
// not capture, so each callback finds its Transfer through the userdata pointer (an Unmanaged reference that the
// engine holds retained from `add` until `finish`).

import CCurl
import Dispatch
import Glibc
import Logging
import RangeFSFetch
import RangeFSPlatform
import RangeFSSystem
import Synchronization

/// A request in progress: owns its easy handle and header list, and frees them in `deinit`. Redirects are followed
/// by the engine, not by libcurl: each hop is a Transfer of its own, sent the credentials of its own origin only.
final class Transfer: @unchecked Sendable {
    // @unchecked Sendable: created on any thread, then touched only by the engine's thread (callbacks, finish).

    let handle: UnsafeMutableRawPointer
    let sink: RangeResponseSink
    /// Set by the engine while background transfers must not receive.
    private let pauseSignal: PauseSignal
    /// Whether the write callback paused this transfer (and the engine must resume it).
    private(set) var pausedInCallback = false
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// libcurl writes its error message here; allocated for the handle's lifetime.
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// When this transfer last showed progress (uptime nanoseconds), for `RangeRequest.stallTimeout`: 0 until
    /// its request went out; then each header line or body callback, and each check while it was paused.
    var progressAt: UInt64 = 0
    /// Where to log one line when the request ends (`-v`); nil logs nothing.
    let requestLog: Logger?
    let session: HTTPSession
    /// What this hop asks, and how it came to be asked (Transfer+Hop.swift).
    let hop: Hop
    /// What this hop's response said so far, and what was done with it (Transfer+Hop.swift).
    private(set) var reception = Reception()

    enum FollowUp: Equatable {
        /// The server redirected: ask this URL next.
        case redirect(String)
        /// A remembered target refused (401, 403, 404, 410): ask the original URL again.
        case resolveAgain
        /// The proxy failed before the sink heard anything: ask again through the chain's next choice.
        case nextProxy
        /// The server said "not now": ask the same again after this many seconds.
        case askAgain(after: Double, Throttled)
    }

    init(request: RangeRequest?, url: String, originalURL: String? = nil, hops: Int = 0, remembered: Bool = false,
         proxyTries: Int = 0, sink: RangeResponseSink, session: HTTPSession, pauseSignal: PauseSignal,
         requestLog: Logger? = nil, throttled: Throttled? = nil, startDelay: Double = 0) {
        let options = session.options
        // The URL the mount knows hides its query's values (URLQuery); the request sends the real one, and the
        // validator and signature its origin needs.
        let wire = session.credentials.wire(for: url, range: request?.range, validator: request?.ifRange)
        hop = Hop(request: request, url: url, wireURL: wire.url, originalURL: originalURL ?? url, hops: hops,
                  remembered: remembered,
                  chainProxy: session.chainProxy(for: url, offset: request?.range?.lowerBound ?? 0),
                  proxyTries: proxyTries, throttled: throttled, startDelay: startDelay)
        self.pauseSignal = pauseSignal
        self.requestLog = requestLog
        self.session = session
        handle = curl_easy_init()!
        self.sink = sink
        errorBuffer = .allocate(capacity: Int(rfs_curl_error_size()))
        errorBuffer.initialize(repeating: 0, count: Int(rfs_curl_error_size()))
        rfs_easy_setopt_string(handle, CURLOPT_URL, wire.url)
        rfs_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        rfs_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        rfs_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        rfs_easy_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
        rfs_easy_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, options.lowSpeedTime)
        // Large receive buffers for bodies; a probe reads one byte, and a mount probes thousands of URLs.
        if request != nil { rfs_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, 256 << 10) }
        if options.http2 {
            // Wait for the connection's ALPN answer, so that transfers share one HTTP/2 connection.
            rfs_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1)
            rfs_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        } else {
            rfs_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        }
        rfs_easy_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent)
        Self.configureTLS(handle, options)
        if let chainProxy = hop.chainProxy {
            // DIRECT is the empty proxy, which also keeps libcurl from the environment's.
            rfs_easy_setopt_string(handle, CURLOPT_PROXY, chainProxy.url ?? "")
        } else if let proxy = options.proxy {
            rfs_easy_setopt_string(handle, CURLOPT_PROXY, proxy)
        }
        if let noProxy = options.noProxy { rfs_easy_setopt_string(handle, CURLOPT_NOPROXY, noProxy) }
        if let cookies = options.cookieFile { rfs_easy_setopt_string(handle, CURLOPT_COOKIEFILE, cookies) }
        if let netrc = options.netrcFile {
            rfs_easy_setopt_long(handle, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            if !netrc.isEmpty { rfs_easy_setopt_string(handle, CURLOPT_NETRC_FILE, netrc) }
        }
        if let request {
            if let range = request.range {
                rfs_easy_setopt_string(handle, CURLOPT_RANGE, "\(range.lowerBound)-\(range.upperBound - 1)")
            }
        } else {
            rfs_easy_setopt_string(handle, CURLOPT_RANGE, "0-0")  // a probe
            // RFC 9530: a server that can send the file's digest is asked to (it is checked at completion).
            headerList = curl_slist_append(headerList, "Want-Repr-Digest: sha-256=10, sha-512=3")
        }
        if let rate = request?.maxBytesPerSecond {
            rfs_easy_setopt_off(handle, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate))
        }
        headerList = curl_slist_append(headerList, "Accept-Encoding: identity")
        if let accept = request?.accept { headerList = curl_slist_append(headerList, "Accept: \(accept)") }
        for line in wire.headers { headerList = curl_slist_append(headerList, line) }
        // This origin's credentials, and only this origin's: a hop to another host gets its own, or none.
        if let credentials = session.credentials.credentials(for: url) {
            if let user = credentials.user {
                rfs_easy_setopt_string(handle, CURLOPT_USERNAME, user)
                rfs_easy_setopt_string(handle, CURLOPT_PASSWORD, credentials.password ?? "")
            }
            // A URL's own user and password win over an Authorization given for all the mount's URLs.
            for line in credentials.headers
            where credentials.user == nil || !line.lowercased().hasPrefix("authorization:") {
                headerList = curl_slist_append(headerList, line)
            }
        }
        rfs_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
        // SAFETY: the buffer lives until deinit, after curl_easy_cleanup, so libcurl never writes to freed memory.
        rfs_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        rfs_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, transferWriteCallback)
        rfs_easy_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, transferHeaderCallback)
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Points libcurl's userdata at this transfer; returns the retained reference the engine releases later.
    func attach() -> Unmanaged<Transfer> {
        // SAFETY: retained here, released by the engine after curl_multi_remove_handle, so callbacks never
        // see a freed object.
        let reference = Unmanaged.passRetained(self)
        let pointer = reference.toOpaque()
        rfs_easy_setopt_pointer(handle, CURLOPT_PRIVATE, pointer)
        rfs_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, pointer)
        rfs_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, pointer)
        return reference
    }

    /// Resumes a transfer its write callback paused; engine thread only. libcurl delivers the data it held back
    /// (possibly before this returns). Pausing is only ever done from inside the write callback: pausing from
    /// outside, with curl_easy_pause(CURLPAUSE_RECV), was seen to skip a buffer of body bytes on libcurl 7.88.
    func resume() {
        guard pausedInCallback else { return }
        pausedInCallback = false
        curl_easy_pause(handle, CURLPAUSE_CONT)
    }

    /// A header of this hop's response, by its lowercased name.
    func responseHeader(_ name: String) -> String? { reception.headers[name] }

    /// Takes one header line; false refuses the response (its headers are larger than rangefs takes).
    fileprivate func receiveHeaderLine(_ line: String) -> Bool {
        if watchesStall { progressAt = DispatchTime.now().uptimeNanoseconds }
        if line.hasPrefix("HTTP/") {
            reception.headers = [:]  // a new response in a redirect chain
            reception.headerBytes = 0
            return true
        }
        guard let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")) else { return true }
        let name = line[..<colon].lowercased()
        reception.headerBytes += line.utf8.count
        reception.lastHeaderName = name
        if let refusal = Self.headerRefusal(name: name, lineBytes: line.utf8.count, totalBytes: reception.headerBytes) {
            reception.headerRefusal = refusal
            return false
        }
        let value = line[line.utf8.index(after: colon)...].trimmed()
        // A repeated list header adds members (RFC 9110 §5.3); any other repeated header keeps its last value.
        if name == "link" || name == "repr-digest" || name == "digest", let earlier = reception.headers[name] {
            reception.headers[name] = earlier + ", " + value
        } else {
            reception.headers[name] = value
        }
        return true
    }

    private func deliverHeadIfNeeded() -> Bool {
        guard !reception.headDelivered else { return true }
        reception.headDelivered = true
        var status = 0
        rfs_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        rfs_easy_getinfo_string(handle, CURLINFO_EFFECTIVE_URL, &effective)
        // libcurl follows no redirect, so the effective URL is the one sent: never shown or kept with its query.
        let effectiveURL = hop.wireURL != hop.url ? hop.url : effective.map { String(cString: $0) } ?? hop.url
        if [301, 302, 303, 307, 308].contains(status) {
            // From the header: libcurl fills CURLINFO_REDIRECT_URL only once the transfer is over.
            if let location = reception.headers["location"].flatMap({ Self.resolve($0, against: hop.wireURL) }) {
                reception.followUp = .redirect(location)
                return true  // the redirect's own body is read and dropped
            }
        }
        if hop.remembered && [401, 403, 404, 410].contains(status) {
            reception.followUp = .resolveAgain
            return true
        }
        // An error the proxy made itself (RFC 9209 Proxy-Status, or squid's X-Squid-Error) fails the proxy.
        if status >= 500, let chainProxy = hop.chainProxy,
           let said = reception.headers["proxy-status"] ?? reception.headers["x-squid-error"] {
            session.proxyChain?.fail(chainProxy, reason: "HTTP \(status): \(said)")
            if hop.proxyTries + 1 < session.proxyChain?.count ?? 0 {
                reception.followUp = .nextProxy
                return true
            }
        }
        var retriedFor: Double?
        if ThrottleRetry.isThrottle(status) {
            switch afterNotNow() {
            case .askAgain(let next):
                reception.followUp = next
                return true  // its body is read and dropped, up to `droppedBodyLimit`
            case .giveUp(let seconds):
                retriedFor = seconds
            }
        }
        if (200..<300).contains(status) && effectiveURL != hop.originalURL {
            session.redirects.remember(effectiveURL, for: hop.originalURL)
        }
        let head = ResponseHead(status: status, headers: reception.headers, effectiveURL: effectiveURL,
                                proxy: proxyName, retriedFor: retriedFor)
        reception.sinkHeard = true
        if !sink.receive(head: head) {
            reception.cancelledBySink = true
            reception.refusedHead = true
            return false
        }
        return true
    }

    /// What the write callback returns: all bytes taken, 0 to abort, or pause (libcurl keeps the bytes).
    fileprivate enum BodyOutcome { case accepted, abort, pause }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyOutcome {
        // A sink that refused the head never gets body bytes. This matters after a pause: libcurl 7.88 hands the
        // held-back bytes to this callback inside curl_easy_pause, and when the callback refuses them there, the
        // transfer is not aborted but goes on: without this check the rest of a refused response (a 200 to a
        // Range request, another version of the file) reached the sink.
        if reception.cancelledBySink { return .abort }
        if watchesStall { progressAt = DispatchTime.now().uptimeNanoseconds }
        if sink.isPaused || (sink.isBackground && pauseSignal.isPaused) {
            pausedInCallback = true
            return .pause
        }
        guard deliverHeadIfNeeded() else { return .abort }
        if reception.followUp != nil {
            reception.droppedBytes += bytes.count
            reception.droppedBodyCut = reception.droppedBytes > Self.droppedBodyLimit
            return reception.droppedBodyCut ? .abort : .accepted
        }
        if !sink.receive(body: bytes) {
            reception.cancelledBySink = true
            return .abort
        }
        return .accepted
    }

    /// Reports the outcome to the sink, exactly once (and logs the request, with `-v`); or, when the response
    /// asks for another hop, returns it for the engine to start (the sink hears from the last hop).
    func finish(_ code: CURLcode) -> Transfer? {
        if requestLog != nil { logRequest(code) }
        if code == CURLE_OK || reception.droppedBodyCut, !reception.cancelledBySink, deliverHeadIfNeeded(),
           let followUp = reception.followUp {
            return next(after: followUp)
        }
        if code != CURLE_OK, !reception.cancelledBySink, let chainProxy = hop.chainProxy,
           let chain = session.proxyChain, Self.proxyFailures.contains(code.rawValue) {
            chain.fail(chainProxy, reason: String(cString: curl_easy_strerror(code)))
            // Nothing reached the sink: the same request goes through the chain's next proxy, until the whole
            // chain was tried. Once bytes arrived, the sink retries from where they stopped (on a good proxy).
            if !reception.sinkHeard && hop.proxyTries + 1 < chain.count { return next(after: .nextProxy) }
        }
        report(code)
        return nil
    }

    /// The proxy this hop goes through, without credentials, to name it in errors.
    private var proxyName: String? {
        session.proxyChain != nil ? hop.chainProxy?.url.map(Redaction.redact) : session.proxy(for: hop.url)
    }

    /// The hop that `followUp` asks for; nil (and the sink told why) when there is none to take.
    private func next(after followUp: FollowUp) -> Transfer? {
        switch followUp {
        case .nextProxy:
            return Transfer(request: hop.request, url: hop.url, originalURL: hop.originalURL, hops: hop.hops,
                            remembered: hop.remembered, proxyTries: hop.proxyTries + 1, sink: sink, session: session,
                            pauseSignal: pauseSignal, requestLog: requestLog, throttled: hop.throttled)
        case .askAgain(let pause, let throttled):
            return Transfer(request: hop.request, url: hop.url, originalURL: hop.originalURL, hops: hop.hops,
                            remembered: hop.remembered, proxyTries: hop.proxyTries, sink: sink, session: session,
                            pauseSignal: pauseSignal, requestLog: requestLog, throttled: throttled, startDelay: pause)
        case .resolveAgain:
            session.redirects.forget(hop.originalURL)
            return Transfer(request: hop.request.map { var again = $0; again.url = hop.originalURL; return again },
                            url: hop.originalURL, hops: hop.hops + 1, sink: sink, session: session,
                            pauseSignal: pauseSignal, requestLog: requestLog, throttled: hop.throttled)
        case .redirect(let target):
            guard hop.hops < session.options.maxRedirects else {
                sink.complete(error: .transport("more than \(session.options.maxRedirects) redirects, the last to "
                                                + Redaction.redact(target)))
                return nil
            }
            do throws(FetchError) {
                try URLValidation.validate(target)
            } catch {
                sink.complete(error: error)
                return nil
            }
            return Transfer(request: hop.request.map { var next = $0; next.url = target; return next }, url: target,
                            originalURL: hop.originalURL, hops: hop.hops + 1, sink: sink, session: session,
                            pauseSignal: pauseSignal, requestLog: requestLog, throttled: hop.throttled)
        }
    }

    private func report(_ code: CURLcode) {
        // A remembered target that fails is asked for afresh next time: the redirect may point elsewhere now.
        // A transfer its sink left midway (nobody wants the rest) says nothing against the target.
        let targetFailed = reception.cancelledBySink ? reception.refusedHead : code != CURLE_OK
        if hop.remembered && targetFailed { session.redirects.forget(hop.originalURL) }
        if code == CURLE_OK {
            sink.complete(error: deliverHeadIfNeeded() && !reception.cancelledBySink ? nil : .cancelled)
            return
        }
        if reception.cancelledBySink {
            sink.complete(error: .cancelled)
            return
        }
        if let refusal = reception.headerRefusal ?? (code == CURLE_OUT_OF_MEMORY && !reception.headDelivered
                                            ? Self.giantHeaderLine(after: reception.lastHeaderName) : nil) {
            sink.complete(error: .untrustedBody(refusal))
            return
        }
        if reception.headDelivered == false, code == CURLE_WRITE_ERROR, reception.headers.isEmpty == false {
            sink.complete(error: deliverHeadIfNeeded() ? .shortBody : .cancelled)
            return
        }
        var osErrno = 0
        rfs_easy_getinfo_long(handle, CURLINFO_OS_ERRNO, &osErrno)
        let message = String(decoding: UnsafeRawBufferPointer(start: errorBuffer, count: strlen(errorBuffer)),
                             as: UTF8.self)
        sink.complete(error: Self.fetchError(code, osErrno: Int32(osErrno), message: message, proxy: proxyName))
    }

    /// One line per request: method and range, status, bytes received, time, and the URL without credentials.
    private func logRequest(_ code: CURLcode) {
        var status = 0
        var bytes: curl_off_t = 0
        var microseconds: curl_off_t = 0
        rfs_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        rfs_easy_getinfo_off(handle, CURLINFO_SIZE_DOWNLOAD_T, &bytes)
        rfs_easy_getinfo_off(handle, CURLINFO_TOTAL_TIME_T, &microseconds)
        let seconds = cFormat("%.3f", Double(microseconds) / 1e6)
        let outcome: String
        if code == CURLE_OK || reception.cancelledBySink {
            outcome = "\(status)\(reception.cancelledBySink ? " (stopped early)" : ""), \(bytes) bytes"
        } else {
            let reason = String(decoding: UnsafeRawBufferPointer(start: errorBuffer, count: strlen(errorBuffer)),
                                as: UTF8.self)
            outcome = "failed (\(reason.isEmpty ? String(cString: curl_easy_strerror(code)) : reason)), \(bytes) bytes"
        }
        requestLog?.debug("\(hop.requestLine) \(outcome) in \(seconds) s \(Redaction.redact(hop.url))")
    }

}

/// The engine's "background transfers must wait" flag, read by write callbacks on the engine thread.
final class PauseSignal: Sendable {
    private let paused = Atomic(false)
    var isPaused: Bool { paused.load(ordering: .relaxed) }
    func set(_ value: Bool) { paused.store(value, ordering: .relaxed) }
}

// libcurl's callbacks. They capture nothing; userdata is the Transfer passed to CURLOPT_WRITEDATA/HEADERDATA.

private let transferWriteCallback: rfs_curl_data_callback = { pointer, size, count, userdata in
    // SAFETY: userdata is the Unmanaged Transfer retained by `attach`, alive until the engine releases it.
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    switch transfer.receiveBody(UnsafeRawBufferPointer(start: pointer, count: length)) {
    case .accepted: return length
    case .abort: return 0
    case .pause: return rfs_curl_writefunc_pause()
    }
}

private let transferHeaderCallback: rfs_curl_data_callback = { pointer, size, count, userdata in
    // SAFETY: as above.
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
    return transfer.receiveHeaderLine(line) ? length : 0
}
