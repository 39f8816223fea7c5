// How BlockSink judges a response's head: which bytes it carries (ResponseHead+Range.swift), and whether they are
// of the cached version: a part (a 206, or a 200 with exactly the range asked), the whole file (the file changed,
// or its server ignores Range), or a refusal (412 from an object store's If-Match, another status). See
// BlockSink.swift for the rules this applies.
import RangeFSCache
import RangeFSCatalog
import RangeFSObjectStore

extension BlockSink {
    package func receive(head: ResponseHead) -> Bool {
        tally.proxy = head.proxy
        switch head.carriedBytes(asked: plan.wholeFile ? nil : wanted) {
        case .part(let contentRange):
            return receive(part: contentRange, of: head)
        case .wholeFile:
            return receive(wholeFile: head)
        case .wrongRange(let value):
            current.failure = .badContentRange(value)
            return false
        case .otherStatus:
            // 412: an object store's If-Match failed (ObjectStore.swift): the object is not the version cached.
            current.failure = head.status == 412 ? .remoteChanged : head.statusError
            // An object store says why in an XML body: its Code names the fix, and tells an expired session key
            // (tried again with the key read anew) from a wrong one. Read it (at most `errorBodyLimit` bytes).
            if head.status >= 400, head.status != 412, head["content-type"]?.lowercased().contains("xml") == true {
                current.errorBody = []
                return true
            }
            return false
        }
    }

    /// Bytes of an error's body kept to read the object store's Code from.
    static var errorBodyLimit: Int { 16 << 10 }

    /// Keeps the error body's bytes; false (cancel) once it is longer than an error document is, with its first
    /// `errorBodyLimit` bytes kept (the Code and Message come first).
    func receive(errorBytes bytes: UnsafeRawBufferPointer) -> Bool {
        let room = Self.errorBodyLimit - (current.errorBody?.count ?? 0)
        current.errorBody?.append(contentsOf: bytes.prefix(room))
        return bytes.count <= room
    }

    /// The attempt's failure in the object store's words when its error body says them.
    func objectStoreFailure(_ failure: FetchError?) -> FetchError? {
        guard let body = current.errorBody else { return failure }
        current.errorBody = nil
        guard case .httpStatus(let status)? = failure,
              let error = ObjectListingXML.error(body, cut: body.count >= Self.errorBodyLimit) else { return failure }
        return .objectStore(status: status, code: error.code, bucket: error.bucket ?? "")
    }

    /// The head of a part of the file (a 206, or a 200 with exactly the range asked for): kept if it starts where
    /// asked, its body is what it names, and it is of the cached version.
    private func receive(part contentRange: ContentRange, of head: ResponseHead) -> Bool {
        let value = head["content-range"] ?? "(missing)"
        guard contentRange.fits(wanted), let range = contentRange.range else {
            current.failure = .badContentRange(value)
            return false
        }
        if let refusal = head.untrustedBody(expectedLength: UInt64(range.count)) {
            current.failure = refusal
            return false
        }
        current.expectedBody = UInt64(range.count)
        current.holdingBack = !head.statesItsLength
        // A 206 answered If-Range: it is of the version asked for. A 200 that carries the range (rclone serve s3,
        // which ignores If-Range) answered none: its own validators say which version its bytes are of.
        let answeredIfRange = head.status == 206
        let now = RemoteMetadata(url: current.choice?.url ?? url, size: contentRange.completeLength ?? entry.size,
                                 etag: head["etag"] ?? "", lastModified: head["last-modified"] ?? "")
        if let mirrors = plan.mirrors, let choice = current.choice, !choice.isPrimary {
            // A mirror's own validator, for its own If-Range; its length must be the file's.
            if !answeredIfRange, let known = choice.validator, known != now.ifRangeValidator {
                current.failure = .remoteChanged  // the mirror changed since its validator was learned, not the file
                return false
            }
            if !mirrors.learn(choice.index, size: contentRange.completeLength, expected: entry.size,
                               validator: now.ifRangeValidator) {
                current.dropReason = "its length is \(contentRange.completeLength ?? 0) bytes, not \(entry.size)"
                current.failure = .badContentRange(value)
                return false
            }
            return true
        }
        if let total = contentRange.completeLength, total != entry.size {
            current.failure = .remoteChanged
            return false
        }
        // A 206 whose own validators are not the cached ones did not honour the If-Range (or If-Match) it was
        // sent, or was sent none (a weak ETag cannot condition a request, and a server may state no date): a
        // gateway that drops the condition, or a file replaced by one of the same length mid-read, serves another
        // version's bytes. Judged as a 200's, so that versions never mix in one file: another ETag, weak or
        // strong, another Last-Modified, as the server states them (RemoteMetadata.isContradicted).
        let contradicted = entry.version.remoteMetadata.isContradicted(by: now)
        if !answeredIfRange || contradicted {
            guard isCachedVersion(now, askAgainIfRotating: false) else { return false }
            // Passed by length and date with another ETag (a server that rotates them): not the cached one seen.
            if now.etag != entry.version.remoteMetadata.etag { return true }
        }
        entry.version.noteOwnAnswer()
        return true
    }

    /// The head of the whole file, to a request with Range (the file changed, or its server ignores Range) or to a
    /// whole-file stream's.
    private func receive(wholeFile head: ResponseHead) -> Bool {
        // Checked first: an encoded body's Content-Length is not the file's size, and must not read as a change.
        // The length is left to `isCachedVersion` below: another Content-Length here is a change of the file.
        if let refusal = head.untrustedBody(expectedLength: nil) {
            current.failure = refusal
            return false
        }
        let length = head["content-length"].flatMap(UInt64.init)
        let etag = head["etag"] ?? "", lastModified = head["last-modified"] ?? ""
        // A file of unknown size is judged by its validators alone: its entry's size is a capacity.
        let now = plan.sizeUnknown ? RemoteMetadata.unsized(url: url, etag: etag, lastModified: lastModified)
            : RemoteMetadata(url: url, size: length ?? entry.size, etag: etag, lastModified: lastModified)
        if let choice = current.choice, !choice.isPrimary, !plan.wholeFile {
            // The mirror changed since its validator was learned (set aside, relearned later), or it ignores
            // Range or holds another length (dropped).
            if now.size != entry.size {
                current.dropReason = "its length is \(now.size) bytes, not \(entry.size)"
            } else if choice.validator == nil || choice.validator == now.ifRangeValidator {
                current.dropReason = "it ignores Range requests"
            }
            current.failure = current.dropReason == nil ? .remoteChanged : .rangeIgnored
            return false
        }
        guard isCachedVersion(now, askAgainIfRotating: !plan.wholeFile) else { return false }
        if plan.wholeFile {
            current.expectedBody = plan.sizeUnknown ? length : entry.size
            return true
        }
        current.failure = .rangeIgnored
        return false
    }

    /// Whether an answer that did not answer the cache's If-Range is of the cached version, by what its head says
    /// of the file (`now`); otherwise sets `failure`: a change, or an ask again at once.
    private func isCachedVersion(_ now: RemoteMetadata, askAgainIfRotating: Bool) -> Bool {
        if entry.version.remoteMetadata.etagRotated(to: now) {
            // Only the ETag differs. A server whose nodes make their own (behind a load balancer) is no change:
            // length and Last-Modified tell the version from then on, and a request whose answer was the whole file
            // asks again with them at once. One such answer is not proof (the file may have been replaced within
            // the second): the first asks again with the cache's own validator (see RotatingETags.swift).
            switch entry.version.judgeETag(now.etag) {
            case .rotates:
                if let origin = entry.version.retireETag() { context.owner.etagsRotate(at: origin) }
                if askAgainIfRotating {
                    current.askAgain = true
                    current.failure = .cancelled
                    return false
                }
            case .askAgain where !plan.wholeFile:
                current.askAgain = true
                current.failure = .cancelled
                return false
            case .askAgain, .changed:
                break  // a change, below
            }
        }
        guard entry.version.matches(now) else {
            current.failure = .remoteChanged
            return false
        }
        return true
    }
}
