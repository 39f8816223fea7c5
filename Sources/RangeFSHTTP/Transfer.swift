// One libcurl easy handle and the sink its response goes to. libcurl calls back into C function pointers that may
// not capture, so each callback finds its Transfer through the userdata pointer (an Unmanaged reference that the
// engine holds retained from `add` until `finish`).

import CCurl
import Foundation
import Logging
import RangeFSCore
import Synchronization

/// A request in progress: owns its easy handle and header list, and frees them in `deinit`.
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
    private var responseHeaders: [String: String] = [:]
    private var headDelivered = false
    private var cancelledBySink = false

    /// Where to log one line when the request ends (`-v`); nil logs nothing.
    private let requestLog: Logger?
    /// The request as that line shows it: method and range.
    private let requestLine: String
    private let url: String

    init(request: RangeRequest?, url: String, sink: RangeResponseSink, options: HTTPOptions,
         pauseSignal: PauseSignal, requestLog: Logger? = nil) {
        self.pauseSignal = pauseSignal
        self.requestLog = requestLog
        self.url = url
        if let request {
            requestLine = request.range.map { "GET bytes=\($0.lowerBound)-\($0.upperBound - 1)" } ?? "GET"
        } else {
            requestLine = "GET bytes=0-0"
        }
        handle = curl_easy_init()!
        self.sink = sink
        errorBuffer = .allocate(capacity: Int(rfs_curl_error_size()))
        errorBuffer.initialize(repeating: 0, count: Int(rfs_curl_error_size()))
        rfs_easy_setopt_string(handle, CURLOPT_URL, url)
        rfs_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        rfs_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
        rfs_easy_setopt_long(handle, CURLOPT_MAXREDIRS, options.maxRedirects)
        rfs_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        rfs_easy_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
        rfs_easy_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, options.lowSpeedTime)
        rfs_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, 256 << 10)
        rfs_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1)
        rfs_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        rfs_easy_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent)
        if let request {
            if let range = request.range {
                rfs_easy_setopt_string(handle, CURLOPT_RANGE, "\(range.lowerBound)-\(range.upperBound - 1)")
            }
        } else {
            rfs_easy_setopt_string(handle, CURLOPT_RANGE, "0-0")  // a probe
        }
        if let rate = request?.maxBytesPerSecond {
            rfs_easy_setopt_off(handle, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate))
        }
        headerList = curl_slist_append(headerList, "Accept-Encoding: identity")
        if let accept = request?.accept { headerList = curl_slist_append(headerList, "Accept: \(accept)") }
        if let validator = request?.ifRange, request?.range != nil {
            headerList = curl_slist_append(headerList, "If-Range: \(validator)")
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

    fileprivate func receiveHeaderLine(_ line: String) {
        if line.hasPrefix("HTTP/") {
            responseHeaders = [:]  // a new response in a redirect chain
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        responseHeaders[name] = value
    }

    private func deliverHeadIfNeeded() -> Bool {
        guard !headDelivered else { return true }
        headDelivered = true
        var status = 0
        rfs_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        rfs_easy_getinfo_string(handle, CURLINFO_EFFECTIVE_URL, &effective)
        let head = ResponseHead(status: status, headers: responseHeaders, effectiveURL: effective.map { String(cString: $0) })
        if !sink.receive(head: head) {
            cancelledBySink = true
            return false
        }
        return true
    }

    /// What the write callback returns: all bytes taken, 0 to abort, or pause (libcurl keeps the bytes).
    fileprivate enum BodyOutcome { case accepted, abort, pause }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyOutcome {
        if sink.isPaused || (sink.isBackground && pauseSignal.isPaused) {
            pausedInCallback = true
            return .pause
        }
        guard deliverHeadIfNeeded() else { return .abort }
        if !sink.receive(body: bytes) {
            cancelledBySink = true
            return .abort
        }
        return .accepted
    }

    /// Reports the outcome to the sink, exactly once (and logs the request, with `-v`).
    func finish(_ code: CURLcode) {
        if requestLog != nil { logRequest(code) }
        if code == CURLE_OK {
            sink.complete(error: deliverHeadIfNeeded() ? nil : .cancelled)
            return
        }
        if cancelledBySink {
            sink.complete(error: .cancelled)
            return
        }
        if headDelivered == false, code == CURLE_WRITE_ERROR, responseHeaders.isEmpty == false {
            sink.complete(error: deliverHeadIfNeeded() ? .shortBody : .cancelled)
            return
        }
        var osErrno = 0
        rfs_easy_getinfo_long(handle, CURLINFO_OS_ERRNO, &osErrno)
        let message = String(decoding: UnsafeRawBufferPointer(start: errorBuffer, count: strlen(errorBuffer)),
                             as: UTF8.self)
        sink.complete(error: Self.fetchError(code, osErrno: Int32(osErrno), message: message))
    }

    /// One line per request: method and range, status, bytes received, time, and the URL without credentials.
    private func logRequest(_ code: CURLcode) {
        var status = 0
        var bytes: curl_off_t = 0
        var microseconds: curl_off_t = 0
        rfs_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        rfs_easy_getinfo_off(handle, CURLINFO_SIZE_DOWNLOAD_T, &bytes)
        rfs_easy_getinfo_off(handle, CURLINFO_TOTAL_TIME_T, &microseconds)
        let seconds = String(format: "%.3f", Double(microseconds) / 1e6)
        let outcome: String
        if code == CURLE_OK || cancelledBySink {
            outcome = "\(status)\(cancelledBySink ? " (stopped early)" : ""), \(bytes) bytes"
        } else {
            let reason = String(decoding: UnsafeRawBufferPointer(start: errorBuffer, count: strlen(errorBuffer)),
                                as: UTF8.self)
            outcome = "failed (\(reason.isEmpty ? String(cString: curl_easy_strerror(code)) : reason)), \(bytes) bytes"
        }
        requestLog?.debug("\(requestLine) \(outcome) in \(seconds) s \(Redaction.redact(url))")
    }

    static func fetchError(_ code: CURLcode, osErrno: Int32, message: String) -> FetchError {
        let detail = message.isEmpty ? String(cString: curl_easy_strerror(code)) : message
        switch code {
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
    transfer.receiveHeaderLine(line)
    return length
}
