// The libcurl engine: one thread owns the multi handle and runs curl_multi_poll; other threads hand it transfers
// through a queue and wake it with curl_multi_wakeup (DESIGN.md §2). Connections are pooled by the multi handle,
// so consecutive Range requests to one host reuse keep-alive connections (or one HTTP/2 connection, with --http2).

import CCurl
import Dispatch
import Logging
import RangeFSCache
import RangeFSFetch
import RangeFSPlatform
import RangeFSSystem

/// libcurl's global state must be set up once, before any other thread uses libcurl.
private let curlGlobalInit: Void = {
    curl_global_init(Int(CURL_GLOBAL_DEFAULT))
}()

/// Performs ranged GETs and probes with libcurl.
public final class CurlEngine: RangeFetching, @unchecked Sendable {
    // @unchecked Sendable: `multi` is used only by the engine thread, except for curl_multi_wakeup, which libcurl
    // documents as callable from any thread; everything else shared is inside `queue`'s lock.

    private let multi: UnsafeMutableRawPointer
    private let session: HTTPSession
    private let logger: Logger
    private let queue = LockedBox(Queue())
    private let stopped = DispatchSemaphore(value: 0)
    private let pauseSignal = PauseSignal()

    private struct Queue {
        var pending: [Transfer] = []
        var stopping = false
    }

    public convenience init(options: HTTPOptions = HTTPOptions(), logger: Logger) {
        self.init(session: HTTPSession(options: options), logger: logger)
    }

    /// An engine of `session`, which it shares with the mount's other engines.
    public init(session: HTTPSession, logger: Logger) {
        _ = curlGlobalInit
        multi = curl_multi_init()!
        self.session = session
        let options = session.options
        self.logger = logger
        rfs_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.maxHostConnections)
        rfs_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, options.maxTotalConnections)
        rfs_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, options.maxTotalConnections)
        startThread(name: "rangefs-curl") { [self] in self.run() }
    }

    /// Stops the engine thread; transfers still running are finished with `.cancelled`.
    /// Where each request is logged when it ends: the logger, if it logs debug lines (`-v`).
    private var requestLog: Logger? { logger.logLevel <= .debug ? logger : nil }

    public func shutdown() {
        queue.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
        stopped.wait()
    }

    public func start(_ request: RangeRequest, sink: RangeResponseSink) {
        // Straight to where the URL redirected before, while that target is good.
        let target = session.redirects.target(for: request.url)
        enqueue(Transfer(request: request, url: target ?? request.url, originalURL: request.url,
                         remembered: target != nil, sink: sink, session: session, pauseSignal: pauseSignal,
                         requestLog: requestLog))
    }

    /// Background transfers pause themselves in their write callback while this is set; clearing it makes the
    /// engine thread resume them.
    public func pauseBackground(_ paused: Bool) {
        pauseSignal.set(paused)
        curl_multi_wakeup(multi)
    }

    public func wake() {
        curl_multi_wakeup(multi)
    }

    public func probe(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        do throws(FetchError) {
            try URLValidation.validate(url)
        } catch {
            return completion(.failure(error))
        }
        let target = session.redirects.target(for: url)
        enqueue(Transfer(request: nil, url: target ?? url, originalURL: url, remembered: target != nil,
                         sink: ProbeSink(url: url, completion: completion), session: session,
                         pauseSignal: pauseSignal, requestLog: requestLog))
    }

    private func enqueue(_ transfer: Transfer) {
        let accepted = queue.withLock { queue -> Bool in
            guard !queue.stopping else { return false }
            queue.pending.append(transfer)
            return true
        }
        guard accepted else { return transfer.sink.complete(error: .cancelled) }
        curl_multi_wakeup(multi)
    }

    // MARK: The engine thread

    /// How often transfers with a stall timeout are checked, and the gap between two checks that says the engine
    /// thread itself was held up (uptime nanoseconds).
    private static let stallCheckInterval: UInt64 = 250_000_000
    private static let heldUpAfter: UInt64 = 1_500_000_000

    private func run() {
        var active: [UnsafeMutableRawPointer: Unmanaged<Transfer>] = [:]
        var lastStallCheck = DispatchTime.now().uptimeNanoseconds
        while true {
            let (incoming, stopping) = queue.withLock { queue in
                defer { queue.pending.removeAll() }
                return (queue.pending, queue.stopping)
            }
            if stopping { break }
            for transfer in incoming {
                active[transfer.handle] = transfer.attach()
                curl_multi_add_handle(multi, transfer.handle)
            }
            let paused = pauseSignal.isPaused
            var watching = false
            for reference in active.values {
                let transfer = reference.takeUnretainedValue()
                if !transfer.sink.isPaused && (!paused || !transfer.sink.isBackground) { transfer.resume() }
                watching = watching || transfer.watchesStall
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(multi, handle)
                if let reference = active.removeValue(forKey: handle) {
                    if let next = reference.takeUnretainedValue().finish(code) {
                        if next.hop.startDelay > 0 {
                            // A pause after "not now" (ThrottleRetry.swift): the hop queues again when it is over.
                            DispatchQueue.global().asyncAfter(deadline: .now() + next.hop.startDelay) { [self] in
                                enqueue(next)
                            }
                        } else {
                            active[next.handle] = next.attach()
                            curl_multi_add_handle(multi, next.handle)
                        }
                    }
                    reference.release()
                }
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if watching && now - lastStallCheck >= Self.stallCheckInterval {
                let heldUp = now - lastStallCheck > Self.heldUpAfter
                for (handle, reference) in active {
                    guard reference.takeUnretainedValue().isStalled(now: now, heldUp: heldUp) else { continue }
                    curl_multi_remove_handle(multi, handle)
                    active.removeValue(forKey: handle)
                    reference.takeUnretainedValue().abandonStalled()
                    reference.release()
                }
            }
            if !watching || now - lastStallCheck >= Self.stallCheckInterval { lastStallCheck = now }
            curl_multi_poll(multi, nil, 0, watching ? 250 : 1000, nil)
        }
        for (handle, reference) in active {
            curl_multi_remove_handle(multi, handle)
            reference.takeUnretainedValue().sink.complete(error: .cancelled)
            reference.release()
        }
        let leftovers = queue.withLock { queue in
            defer { queue.pending.removeAll() }
            return queue.pending
        }
        leftovers.forEach { $0.sink.complete(error: .cancelled) }
        curl_multi_cleanup(multi)
        stopped.signal()
    }
}

/// Collects the head of a `Range: bytes=0-0` probe and turns it into `RemoteMetadata`.
private final class ProbeSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: called only from the engine thread, in order.
    private let url: String
    private let completion: @Sendable (Result<RemoteMetadata, FetchError>) -> Void
    private var head: ResponseHead?

    init(url: String, completion: @escaping @Sendable (Result<RemoteMetadata, FetchError>) -> Void) {
        self.url = url
        self.completion = completion
    }

    func receive(head: ResponseHead) -> Bool {
        self.head = head
        return head.status == 206  // one byte; anything else would stream a whole body we do not want
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool { true }

    func complete(error: FetchError?) {
        guard let head else { return completion(.failure(error ?? .shortBody)) }
        do throws(FetchError) {
            completion(.success(try ProbedMetadata.read(url: url, probeResponse: head)))
        } catch {
            completion(.failure(error))
        }
    }
}
