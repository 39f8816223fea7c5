// A file whose server does not say how big it is (a chunked or close-delimited response without Content-Length).
// Such a file can only be read as a stream from its first byte, so it is not cut into blocks while it downloads:
// one GET without Range appends to the entry folder's `stream` file (a `StreamFile`, the cache's side), and
// readers are answered from that file as soon as the stream has passed the end of what they asked for. The FUSE adapter
// opens it with direct I/O, so the kernel asks for bytes past the size it was last told.
//
// Durability: every `commitBytes` received (or `commitInterval` elapsed), the stream file is fdatasynced and then
// `stream-state` records how many bytes are durable. A restart or a later stream starts again at byte 0 (the server
// sends no length and usually ignores Range) and compares what it gets with the durable bytes before it appends:
// bytes that differ mean another version of the file, which replaces the old one from that point on and fails
// handles of the old version with ESTALE.
//
// When the body ends, its length is the file's size: the stream becomes an ordinary complete entry (data, CRCs, a
// full bitmap, then the header), the catalog learns the size, and the file behaves like any other from then on.
//
// While nobody reads the file, the stream goes on only if the prefetch policy asked for the file to be completed;
// otherwise it stops, and what it stored stays for the next reader.

import Dispatch
import Glibc
import Logging
import Synchronization

/// The download of one stream-only file.
final class UnsizedDownload: Sendable {
    let url: String
    let blockSize: Int
    let fetcher: RangeFetching
    let policy: FetchPolicy
    let logger: Logger
    /// The `stream` file and its record of durable bytes.
    let file: StreamFile
    let state: Mutex<State>
    /// Serialises commits, so that an older length never replaces a newer one.
    private let commitLock = Mutex(())
    /// Told the file's metadata once its size is known (it is then an ordinary entry).
    let completed: @Sendable (RemoteMetadata) -> Void

    typealias Waiter = @Sendable (Result<Void, FetchError>) -> Void

    struct State {
        /// The validators of the version being cached.
        var etag: String
        var lastModified: String
        /// Bytes written to `stream` (readable), and those of them known durable.
        var received: UInt64
        var durable: UInt64
        /// The size, once the stream reached the end of the body.
        var size: UInt64?
        var running = false
        /// Bumped when another version replaced the cached bytes: handles of an older generation get ESTALE.
        var generation = 0
        /// Readers waiting for the stream to pass `end`.
        var waiters: [(end: UInt64, resume: Waiter)] = []
        /// Handles open on the file, and whether the prefetch policy asked for it to be completed.
        var openHandles = 0
        var fillWanted = false
        var lastError: String?
        var lastCommit = ContinuousClock.now
        var commitQueued = false
    }

    /// Goes on from what an earlier stream of `metadata`'s version left in `file` (its durable bytes).
    init(metadata: RemoteMetadata, file: StreamFile, fetcher: RangeFetching, policy: FetchPolicy, blockSize: Int,
         logger: Logger, completed: @escaping @Sendable (RemoteMetadata) -> Void) {
        url = metadata.url
        self.file = file
        self.blockSize = blockSize
        self.fetcher = fetcher
        self.policy = policy
        self.logger = logger
        self.completed = completed
        let kept = file.keptBytes
        state = Mutex(State(etag: metadata.etag, lastModified: metadata.lastModified, received: kept, durable: kept))
    }

    // MARK: Progress

    /// Bytes cached so far (the whole file once `size` is known).
    var cachedBytes: UInt64 { state.withLock { $0.received } }
    var isStreaming: Bool { state.withLock { $0.running } }
    var lastError: String? { state.withLock { $0.lastError } }
    var generation: Int { state.withLock { $0.generation } }
    /// The file's size once the stream reached its end (it is then an ordinary entry).
    var completedSize: UInt64? { state.withLock { $0.size } }

    // MARK: Reading

    /// The bytes `offset..<offset+count` (clipped at the end once it is known), when the stream has them; `reply`
    /// runs exactly once. A handle opened on an older version (`generation`) gets `.remoteChanged`.
    func read(offset: UInt64, count: Int, generation: Int,
                     reply: @escaping @Sendable (Result<ReadReply, FetchError>) -> Void) {
        let end = offset + UInt64(count)
        enum Next { case stale, answer, wait, start }
        let next = state.withLock { state -> Next in
            guard state.generation == generation else { return .stale }
            if state.received >= end || state.size != nil { return .answer }
            state.waiters.append((end, { [weak self] result in
                guard let self else { return reply(.failure(.cancelled)) }
                switch result {
                case .success: reply(answer(offset: offset, count: count, generation: generation))
                case .failure(let error): reply(.failure(error))
                }
            }))
            guard !state.running else { return .wait }
            state.running = true
            return .start
        }
        switch next {
        case .stale: reply(.failure(.remoteChanged))
        case .answer: reply(answer(offset: offset, count: count, generation: generation))
        case .wait: break
        case .start: startStream()
        }
    }

    private func answer(offset: UInt64, count: Int, generation: Int) -> Result<ReadReply, FetchError> {
        let available = state.withLock { state -> UInt64? in
            state.generation == generation ? state.received : nil
        }
        guard let available else { return .failure(.remoteChanged) }
        guard offset < available else { return .success(.bytes([])) }
        let count = Int(min(UInt64(count), available - offset))
        do {
            return .success(try file.reply(offset: offset, count: count))
        } catch {
            return .failure(.transport("cannot read the cached stream: \(error)"))
        }
    }

    /// Counts a handle open on the file (it keeps the stream going), or one closed.
    func opened() { state.withLock { $0.openHandles += 1 } }
    func closed() { state.withLock { $0.openHandles -= 1 } }

    /// Downloads the file to its end whether or not anybody reads it (the prefetch policy asked for it).
    func fill() {
        let startNow = state.withLock { state -> Bool in
            state.fillWanted = true
            guard !state.running, state.size == nil else { return false }
            state.running = true
            return true
        }
        if startNow { startStream() }
    }

    /// Whether the stream should go on receiving.
    var isWanted: Bool {
        state.withLock { $0.fillWanted || $0.openHandles > 0 || !$0.waiters.isEmpty }
    }

    // MARK: The stream

    private func startStream(attempt: Int = 1) {
        logger.debug("streaming \(Redaction.redact(url)) from byte 0 (its server sends no length)")
        fetcher.start(RangeRequest(url: url, range: nil, ifRange: nil),
                      sink: UnsizedStreamSink(download: self, attempt: attempt))
    }

    /// A response began: another version than the one cached starts the cache over. False refuses it.
    func begin(_ head: ResponseHead) -> Bool {
        guard head.status == 200 else { return false }
        let etag = head["etag"] ?? "", lastModified = head["last-modified"] ?? ""
        let same = state.withLock { state in
            // Nothing cached, nothing served: a server whose validators change on every response costs nothing.
            if state.received == 0 {
                (state.etag, state.lastModified) = (etag, lastModified)
                return true
            }
            return RemoteMetadata.unsized(url: url, etag: state.etag, lastModified: state.lastModified)
                .describesSameContent(as: .unsized(url: url, etag: etag, lastModified: lastModified))
        }
        if !same {
            logger.notice("\(Redaction.redact(url)) changed on the server; streaming the new version")
            startOver(at: 0, etag: etag, lastModified: lastModified)
        }
        return true
    }

    /// Takes `bytes` at `position` of the body: compares what is cached already, appends the rest. Returns false
    /// when the file cannot be written.
    func take(_ bytes: UnsafeRawBufferPointer, at position: UInt64) throws(SystemError) {
        var offset = position
        var rest = bytes
        let received = state.withLock { $0.received }
        if offset < received {
            let overlap = Int(min(UInt64(rest.count), received - offset))
            let cached = try file.read(at: offset, count: overlap)
            if let mismatch = (0..<overlap).first(where: { $0 >= cached.count || cached[$0] != rest[$0] }) {
                let at = offset + UInt64(mismatch)
                logger.notice("\(Redaction.redact(url)) sent other bytes at \(at) than those cached; the file changed on the server, keeping only the bytes before")
                let (etag, lastModified) = state.withLock { ($0.etag, $0.lastModified) }
                startOver(at: offset + UInt64(mismatch), etag: etag, lastModified: lastModified)
                offset += UInt64(mismatch)
                // SAFETY: `mismatch` < `overlap` <= `rest.count`.
                rest = UnsafeRawBufferPointer(rebasing: rest[mismatch...])
            } else {
                offset += UInt64(overlap)
                // SAFETY: `overlap` is at most `rest.count` (a min above).
                rest = UnsafeRawBufferPointer(rebasing: rest[overlap...])
            }
        }
        guard !rest.isEmpty else { return }
        try file.write(rest, at: offset)
        let (woken, commitDue) = state.withLock { state -> ([Waiter], Bool) in
            state.received = offset + UInt64(rest.count)
            var woken: [Waiter] = []
            state.waiters.removeAll { waiter in
                guard waiter.end <= state.received else { return false }
                woken.append(waiter.resume)
                return true
            }
            let due = !state.commitQueued && (state.received - state.durable >= file.commitBytes
                || ContinuousClock.now - state.lastCommit >= file.commitInterval)
            if due { state.commitQueued = true }
            return (woken, due)
        }
        resume(woken, with: .success(()))
        if commitDue { file.commitQueue.async { self.commit() } }
    }

    /// Keeps the cached bytes before `offset` (they match the server's) and drops the rest: another version.
    private func startOver(at offset: UInt64, etag: String, lastModified: String) {
        let failed = state.withLock { state -> [Waiter] in
            state.generation += 1
            state.etag = etag
            state.lastModified = lastModified
            state.received = min(state.received, offset)
            state.durable = min(state.durable, offset)
            let failed = state.waiters.map(\.resume)
            state.waiters.removeAll()
            return failed
        }
        resume(failed, with: .failure(.remoteChanged))
        commit()
        do { try file.truncate(to: offset) } catch { logger.error("cannot truncate \(file.path): \(error)") }
    }

    /// Makes the received bytes durable, then records their length.
    func commit() {
        commitLock.withLock { _ in
            let (length, etag, lastModified) = state.withLock { state -> (UInt64, String, String) in
                state.commitQueued = false
                state.lastCommit = .now
                return (state.received, state.etag, state.lastModified)
            }
            do {
                try file.makeDurable(length: length, etag: etag, lastModified: lastModified)
                state.withLock { $0.durable = max($0.durable, min(length, $0.received)) }
            } catch {
                logger.error("cannot make the stream of \(Redaction.redact(url)) durable: \(error)")
            }
        }
    }

    /// The body ended after `length` bytes (nil on a failure, with `error`).
    func finish(length: UInt64?, error: FetchError?, attempt: Int) {
        if let length {
            return complete(size: length)
        }
        let error = error ?? .cancelled
        if error == .cancelled && !isWanted {
            // Nobody reads it and no fill asked for it: stop here, keeping what is stored.
            state.withLock { $0.running = false }
            commit()
            logger.debug("stopped streaming \(Redaction.redact(url)) at byte \(cachedBytes): nobody reads it")
            return restartIfWanted()
        }
        commit()
        if let delay = policy.retry(after: error, attempt: attempt) {
            logger.info("streaming \(Redaction.redact(url)) again in \(delay): \(error.userMessage)")
            DispatchQueue.global().asyncAfter(deadline: .now() + delay.dispatchInterval) {
                self.startStream(attempt: attempt + 1)
            }
            return
        }
        logger.warning("streaming \(Redaction.redact(url)) failed at byte \(cachedBytes): \(error.userMessage)")
        end(with: .failure(error))
    }

    /// The stream is over: every waiting reader gets `result` (a success once the size is known), and the next
    /// read starts another stream.
    private func end(with result: Result<UInt64, FetchError>) {
        let waiters = state.withLock { state -> [Waiter] in
            state.running = false
            switch result {
            case .success(let size):
                state.size = size
                state.lastError = nil
            case .failure(let error):
                state.lastError = error.userMessage
            }
            defer { state.waiters.removeAll() }
            return state.waiters.map(\.resume)
        }
        resume(waiters, with: result.map { _ in () })
    }

    /// A reader that came while the stream was stopping starts it again.
    private func restartIfWanted() {
        let startNow = state.withLock { state -> Bool in
            guard !state.running, state.size == nil, !state.waiters.isEmpty || state.fillWanted else { return false }
            state.running = true
            return true
        }
        if startNow { startStream() }
    }

    /// The stream reached the end: `size` bytes. Makes it an ordinary complete entry, then answers every reader.
    private func complete(size: UInt64) {
        let (received, etag, lastModified) = state.withLock { ($0.received, $0.etag, $0.lastModified) }
        if received > size {
            logger.notice("\(Redaction.redact(url)) ended at \(size) bytes, before those cached; the file changed on the server")
            startOver(at: size, etag: etag, lastModified: lastModified)
        }
        do {
            let metadata = state.withLock { state in
                RemoteMetadata(url: url, size: size, etag: state.etag, lastModified: state.lastModified)
            }
            try file.install(as: metadata, blockSize: blockSize)
            logger.info("\(Redaction.redact(url)) is complete: \(size) bytes; its size is known from now on")
            completed(metadata)
            end(with: .success(size))
        } catch {
            logger.error("cannot keep the complete stream of \(Redaction.redact(url)): \(error)")
            end(with: .failure(.transport("cannot write the cache: \(error)")))
        }
    }

    private func resume(_ waiters: [Waiter], with result: Result<Void, FetchError>) {
        guard !waiters.isEmpty else { return }
        file.replyQueue.async { for waiter in waiters { waiter(result) } }
    }
}

/// Receives the stream of an `UnsizedDownload`.
final class UnsizedStreamSink: RangeResponseSink, @unchecked Sendable {
    // @unchecked Sendable: the fetcher calls one sink from one thread, in order.
    private let download: UnsizedDownload
    private let attempt: Int
    private var position: UInt64 = 0
    private var accepted = false
    private var failure: FetchError?

    init(download: UnsizedDownload, attempt: Int) {
        self.download = download
        self.attempt = attempt
    }

    func receive(head: ResponseHead) -> Bool {
        switch head.carriedBytes(asked: nil) {
        case .wholeFile:
            break
        case .wrongRange(let value):
            failure = .badContentRange(value)
            return false
        case .part, .otherStatus:  // no part answers a request without Range
            failure = head.statusError
            return false
        }
        if let refusal = head.untrustedBody(expectedLength: nil) {
            failure = refusal
            return false
        }
        accepted = download.begin(head)
        return accepted
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        guard accepted else { return false }
        do {
            try download.take(body, at: position)
        } catch {
            failure = .transport("cannot write the cache: \(error)")
            return false
        }
        position += UInt64(body.count)
        if !download.isWanted {
            failure = .cancelled
            return false
        }
        return true
    }

    func complete(error: FetchError?) {
        let outcome = failure ?? error
        download.finish(length: outcome == nil ? position : nil, error: outcome, attempt: attempt)
    }
}
