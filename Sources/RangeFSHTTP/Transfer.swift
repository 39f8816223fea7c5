// One libcurl easy handle and the sink its response goes to. libcurl calls back into C function pointers that may
// not capture, so each callback finds its Transfer through the userdata pointer (an Unmanaged reference that the
// engine holds retained from `add` until `finish`).

import CCurl
import Foundation
import RangeFSCore

/// A request in progress: owns its easy handle and header list, and frees them in `deinit`.
final class Transfer: @unchecked Sendable {
    // @unchecked Sendable: created on any thread, then touched only by the engine's thread (callbacks, finish).

    let handle: UnsafeMutableRawPointer
    let sink: RangeResponseSink
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// libcurl writes its error message here; allocated for the handle's lifetime.
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var responseHeaders: [String: String] = [:]
    private var headDelivered = false
    private var cancelledBySink = false

    init(request: RangeRequest?, url: String, sink: RangeResponseSink, options: HTTPOptions) {
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
        if !sink.receive(head: ResponseHead(status: status, headers: responseHeaders)) {
            cancelledBySink = true
            return false
        }
        return true
    }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard deliverHeadIfNeeded() else { return false }
        if !sink.receive(body: bytes) {
            cancelledBySink = true
            return false
        }
        return true
    }

    /// Reports the outcome to the sink, exactly once.
    func finish(_ code: CURLcode) {
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

// libcurl's callbacks. They capture nothing; userdata is the Transfer passed to CURLOPT_WRITEDATA/HEADERDATA.

private let transferWriteCallback: rfs_curl_data_callback = { pointer, size, count, userdata in
    // SAFETY: userdata is the Unmanaged Transfer retained by `attach`, alive until the engine releases it.
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    let accepted = transfer.receiveBody(UnsafeRawBufferPointer(start: pointer, count: length))
    return accepted ? length : 0
}

private let transferHeaderCallback: rfs_curl_data_callback = { pointer, size, count, userdata in
    // SAFETY: as above.
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
    transfer.receiveHeaderLine(line)
    return length
}
