// The listing of an object store's directory: ListObjectsV2 of the keys right under its prefix (`delimiter=/`),
// page after page (1,000 keys each) until the store says the list is complete. Each page is asked as soon as the
// page before names it, while that one still arrives (ContinuationScan.swift). The pages are read straight to
// binary records (ObjectListingPageReader, ListingRecords.swift), or by ObjectListingXML when they are of a kind
// the straight reader leaves to it. The records are what the directory's reading, saving for offline remounts,
// refreshing and limits take as they take a web listing (DirectoryService, DirectoryListing). What is saved holds
// names, sizes, dates and ETags: no owner, no token, no key.

import Dispatch
import RangeFSCatalog
import RangeFSSystem
import RangeFSObjectStore

extension RangeFetching {
    /// Lists the object-store directory `url` (an identity ending in `/`) of an origin reached with `access`, and
    /// hands `completion` the listing as records (ListingRecords.swift, on a utility queue); fails with the store's
    /// own error (its `Code`) or the status, with `.listingTooLarge` when the pages together pass `limit` bytes, or
    /// with `.listingTimedOut` when the last page has not arrived `timeout` seconds from now. `firstPage` is called
    /// once (on a utility queue) when the first page was read and more follow: the directory is known to be one.
    package func fetchObjectListing(_ url: String, access: ObjectStoreAccess, limit: Int, timeout: Double,
                            firstPage: (@Sendable () -> Void)? = nil,
                            completion: @escaping @Sendable (Result<[UInt8], FetchError>) -> Void) {
        guard let (bucketURL, prefix) = ObjectStoreURL.listing(of: url, access: access) else {
            return completion(.failure(.malformedURL("no bucket in \(Redaction.redact(url))")))
        }
        ObjectListingRun(fetcher: self, bucketURL: bucketURL, prefix: prefix, limit: limit,
                         deadline: ListingDeadline(seconds: timeout), firstPage: firstPage, completion: completion)
            .next(after: nil)
    }
}

/// One listing in progress: its pages so far, the page to read next, and the pages asked ahead of it.
///
/// Pages are read in order on one serial queue. The next page is asked as soon as its token is found in the bytes
/// of the page before (`ContinuationScan`, while that page still arrives), at most `maximumAhead` pages beyond the
/// one to read next, so the store makes a page while the one before is parsed; an answer that comes before its turn
/// waits in `early`. When a page's parse gives a token other than the one found ahead, the page asked on the guess
/// is dropped and the right one asked: what is read is always what the parse of the page before named.
private final class ObjectListingRun: Sendable {
    /// More pages than the largest listing a mount reads (DirectoryListing.maximumEntries) can need: a store that
    /// goes on past it (or repeats a token) is not followed for ever.
    static let maximumPages = 1_100
    /// Pages asked beyond the one to read next: two keep a store busy while a page is parsed, and bound what waits
    /// in memory (a page of 1,000 keys is about 300 KB of XML).
    static let maximumAhead = 2

    typealias Answer = Result<(status: Int, body: [UInt8], cut: Bool), FetchError>

    /// The page whose bytes gave a token (nil: the first page).
    struct Origin {
        var page: String?
    }

    /// What reading a page leads to: the listing's end, or the next page, whether to ask it, and its answer if
    /// it came early.
    private enum Step {
        case end
        case next(token: String, ask: Bool, early: (answer: Answer, attempt: Int)?)
    }

    private let fetcher: any RangeFetching
    private let bucketURL: String
    private let prefix: String
    private let limit: Int
    /// One deadline for every page, their retries included.
    private let deadline: ListingDeadline
    private let completion: @Sendable (Result<[UInt8], FetchError>) -> Void
    private let firstPage: (@Sendable () -> Void)?
    /// The retry rule of every transfer (attempts and delays), for pages too.
    private let policy = FetchPolicy()
    private let state = LockedBox(Gathered())
    /// Where pages are read, one at a time and in order (off the fetcher's thread, which serves every transfer of
    /// the mount).
    private let reading = DispatchQueue(label: "rangefs.object-listing", qos: .utility)

    /// The records so far: folders apart from files, so that every folder comes first in the listing, whichever
    /// page it was on (keys sort by bytes: `data-1.csv` and `data.zip` come before the prefix `data/`).
    private struct Gathered {
        var folders = ListingRecords.Writer()
        var files = ListingRecords.Writer()
        var pages = 0
        /// The tokens of the pages read so far (a store that repeats one would page for ever).
        var tokens = Set<String>()
        /// The token of the page to read next (nil: the first page).
        var current: String?
        /// The pages asked, ahead or in turn, and not yet read: each token with the page whose bytes named it.
        var asked: [String: Origin] = [:]
        /// Answers to pages asked ahead that came before their turn.
        var early: [String: (answer: Answer, attempt: Int)] = [:]
        /// Set once the completion was called: answers still on their way are dropped.
        var finished = false
        /// The reader of plain pages, its buffers kept from page to page (taken while a page is read).
        var reader: ObjectListingPageReader?
    }

    init(fetcher: any RangeFetching, bucketURL: String, prefix: String, limit: Int, deadline: ListingDeadline,
         firstPage: (@Sendable () -> Void)?, completion: @escaping @Sendable (Result<[UInt8], FetchError>) -> Void) {
        self.fetcher = fetcher
        self.bucketURL = bucketURL
        self.prefix = prefix
        self.limit = limit
        self.deadline = deadline
        self.firstPage = firstPage
        self.completion = completion
    }

    /// Asks for the page after `token` (the first page for nil); `attempt` counts the tries of this page.
    func next(after token: String?, attempt: Int = 1) {
        let url = ObjectStoreURL.listURL(bucketURL: bucketURL, prefix: prefix, continuation: token)
        let request = RangeRequest(url: url, range: nil, ifRange: nil)
        let sink = ListingSink(limit: limit, deadline: deadline, keepingErrorBodies: true,
                               ahead: { [self] following in askAhead(following, foundIn: token) }) { [self] answer in
            reading.async { [self] in arrived(answer, after: token, attempt: attempt) }
        }
        fetcher.start(request, sink: sink)
    }

    /// A token found in page `page` (its token) while it still arrives: its page is asked now, unless it was asked
    /// already or enough pages are ahead (the parse asks it then).
    private func askAhead(_ token: String, foundIn page: String?) {
        let ask = state.withLock { state -> Bool in
            guard !state.finished, state.asked.count <= Self.maximumAhead, !state.tokens.contains(token),
                  state.asked[token] == nil else { return false }
            state.asked[token] = Origin(page: page)
            return true
        }
        if ask { next(after: token) }
    }

    /// An answer came (on `reading`): read now if it is the page to read next, kept if it was asked ahead and comes
    /// before its turn, else dropped (a guess the parse did not confirm, or a listing already ended).
    private func arrived(_ answer: Answer, after token: String?, attempt: Int) {
        enum Fate { case read, kept, dropped }
        let fate = state.withLock { state -> Fate in
            if state.finished { return .dropped }
            if token == state.current { return .read }
            guard let token, state.asked[token] != nil else { return .dropped }
            state.early[token] = (answer, attempt)
            return .kept
        }
        if fate == .read { read(answer, after: token, attempt: attempt) }
    }

    private func read(_ result: Answer, after token: String?, attempt: Int) {
        let answer: (status: Int, body: [UInt8], cut: Bool)
        switch result {
        case .failure(let error): return failed(error, after: token, attempt: attempt)
        case .success(let value): answer = value
        }
        guard answer.status == 200 else {
            // An error body past `BlockSink.errorBodyLimit` was cut there (ListingSink): its Code comes first.
            return failed(ObjectListingXML.error(answer.body, cut: answer.cut).map {
                .objectStore(status: answer.status, code: $0.code, bucket: $0.bucket ?? bucketName)
            } ?? .httpStatus(answer.status), after: token, attempt: attempt)
        }
        // Most pages are read straight to records; any other is read whole by the full reader, which decides.
        var reader = state.withLock { state in
            defer { state.reader = nil }
            return state.reader ?? ObjectListingPageReader(prefix: prefix)
        }
        let plain = reader.read(answer.body)
        var parsed: ObjectListingPage?
        if !plain {
            parsed = ObjectListingXML.page(answer.body)
            guard parsed != nil else {
                return finish(.failure(.badListing("the answer to ListObjectsV2 is not a ListBucketResult")))
            }
        }
        let page = parsed.map { (isTruncated: $0.isTruncated, nextContinuationToken: $0.nextContinuationToken) }
            ?? (isTruncated: reader.isTruncated, nextContinuationToken: reader.nextContinuationToken)
        let step = state.withLock { state -> Result<Step, FetchError> in
            state.pages += 1
            if let token { state.asked[token] = nil }
            if let parsed {
                ObjectListingRecords.write(parsed, below: prefix, folders: &state.folders, files: &state.files)
            } else {
                ObjectListingRecords.write(reader, folders: &state.folders, files: &state.files)
            }
            state.reader = reader
            guard state.folders.bytes.count + state.files.bytes.count <= limit else {
                return .failure(.listingTooLarge(limit))
            }
            guard page.isTruncated else { return .success(.end) }
            // A page that says more follow but not where: taking it for the end would drop the rest from the tree
            // (and from the kept listing).
            guard let following = page.nextContinuationToken, !following.isEmpty else {
                return .failure(.badListing("page \(state.pages) says more keys follow but gives no continuation token"))
            }
            guard state.pages < Self.maximumPages, state.tokens.insert(following).inserted else {
                return .failure(.badListing("the store's pages do not end (page \(state.pages))"))
            }
            state.current = following
            // A guess this page named that its parse does not confirm: its answer is dropped when it comes.
            // So is any page a dropped one named in turn.
            var dropped = state.asked.filter { $0.value.page == token && $0.key != following }.map(\.key)
            while let guess = dropped.popLast() {
                state.asked[guess] = nil
                state.early[guess] = nil
                dropped += state.asked.filter { $0.value.page == guess }.map(\.key)
            }
            let ask = state.asked[following] == nil
            if ask { state.asked[following] = Origin(page: token) }
            return .success(.next(token: following, ask: ask, early: state.early.removeValue(forKey: following)))
        }
        switch step {
        case .failure(let error): finish(.failure(error))
        case .success(.next(let following, let ask, let early)):
            // The first page (asked with no token) read, and more follow: the directory is known to be one.
            if token == nil, let firstPage { firstPage() }
            if ask { next(after: following) }
            if let early { read(early.answer, after: following, attempt: early.attempt) }
        case .success(.end):
            // One buffer of the final size, the records let go as soon as they are in it.
            let body = state.withLock { state in
                var parts = [state.folders, state.files]
                state.folders = ListingRecords.Writer()
                state.files = ListingRecords.Writer()
                return ListingRecords.joined(&parts)
            }
            finish(.success(body))
        }
    }

    /// Ends the listing: `completion` once, and answers still on their way dropped.
    private func finish(_ result: Result<[UInt8], FetchError>) {
        let first = state.withLock { state -> Bool in
            defer { state.finished = true; state.early = [:] }
            return !state.finished
        }
        if first { completion(result) }
    }

    /// A page failed: asked again after the retry rule's delay when the failure may pass (`SlowDown`, a 5xx, an
    /// expired session key that the next attempt signs anew, a dropped connection), else the listing fails.
    private func failed(_ error: FetchError, after token: String?, attempt: Int) {
        guard let delay = policy.retry(after: error, attempt: attempt) else { return finish(.failure(error)) }
        guard !deadline.isPast else { return finish(.failure(deadline.error)) }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay.seconds) { [self] in
            next(after: token, attempt: attempt + 1)
        }
    }

    /// The bucket's name, to name it in errors: the last segment of a path-style bucket URL, else the host's label.
    private var bucketName: String {
        let afterScheme = bucketURL.firstRange(of: "://").map { bucketURL[$0.upperBound...] } ?? bucketURL[...]
        if let slash = afterScheme.firstIndex(of: "/"), afterScheme.index(after: slash) < afterScheme.endIndex {
            return String(afterScheme[afterScheme.index(after: slash)...]).trimmed(while: { $0 == "/" })
        }
        return String(afterScheme.prefix { $0 != "." })
    }
}

/// A page's children as records: listed folders first (a key that is also a prefix, `a` beside `a/b`, shows as the
/// folder, and the object of the same name is left out by the reader), each named by what follows the listed
/// prefix. Keys are cut by bytes: a key whose next character after the prefix is a combining mark is still under it.
enum ObjectListingRecords {
    /// Writes a page read by ObjectListingXML.
    static func write(_ page: ObjectListingPage, below prefix: String, folders: inout ListingRecords.Writer,
                      files: inout ListingRecords.Writer) {
        for common in page.commonPrefixes {
            guard let rest = below(common, prefix: prefix) else { continue }
            folders.append(name: rest.trimmed(while: { $0 == "/" }), isDirectory: true)
        }
        for object in page.objects {
            guard let name = below(object.key, prefix: prefix), !name.isEmpty else { continue }  // the folder's own marker
            files.append(name: name, isDirectory: false, size: object.size,
                         modificationTime: object.lastModified.flatMap(RFC3339.parse), datePrecision: .second,
                         etag: object.etag.map { "\"" + $0 + "\"" })
        }
    }

    /// Writes a page read straight to records (ObjectListingPageReader, which named its files below the prefix).
    static func write(_ reader: ObjectListingPageReader, folders: inout ListingRecords.Writer,
                      files: inout ListingRecords.Writer) {
        let prefix = String(decoding: reader.prefix, as: UTF8.self)
        for folder in reader.folders {
            guard let rest = below(String(decoding: reader.decoded[folder], as: UTF8.self), prefix: prefix) else {
                continue
            }
            folders.append(name: rest.trimmed(while: { $0 == "/" }), isDirectory: true)
        }
        for file in reader.files {
            files.appendFile(name: reader.decoded[file.name], size: file.size, modificationTime: file.modificationTime,
                             unquotedETag: file.etag.map { reader.decoded[$0] })
        }
    }

    /// `key` after the listed prefix, by bytes; nil when it is not under it.
    private static func below(_ key: String, prefix: String) -> String? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: key.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }
}
