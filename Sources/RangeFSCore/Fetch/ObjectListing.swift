// The listing of an object store's directory: ListObjectsV2 of the keys right under its prefix (`delimiter=/`),
// page after page (1,000 keys each) until the store says the list is complete. The pages are read
// (ObjectListingXML) and each child written at once as a binary record (ListingRecords.swift), which the
// directory's reading, saving for offline remounts, refreshing and limits take as they take a web listing
// (DirectoryService, DirectoryListing). What is saved holds names, sizes, dates and ETags: no owner, no token, no
// key.

import Dispatch
import Synchronization

extension RangeFetching {
    /// Lists the object-store directory `url` (an identity ending in `/`) of an origin reached with `access`, and
    /// hands `completion` the listing as records (ListingRecords.swift, on a utility queue); fails with the store's
    /// own error (its `Code`) or the status, with `.listingTooLarge` when the pages together pass `limit` bytes, or
    /// with `.listingTimedOut` when the last page has not arrived `timeout` seconds from now. `firstPage` is called
    /// once (on a utility queue) when the first page was read and more follow: the directory is known to be one.
    func fetchObjectListing(_ url: String, access: ObjectStoreAccess, limit: Int, timeout: Double,
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

/// One listing in progress: its pages so far, and the next to ask.
private final class ObjectListingRun: Sendable {
    /// More pages than the largest listing a mount reads (DirectoryListing.maximumEntries) can need: a store that
    /// goes on past it (or repeats a token) is not followed for ever.
    static let maximumPages = 1_100

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
    private let state = Mutex(Gathered())

    /// The records so far: folders apart from files, so that every folder comes first in the listing, whichever
    /// page it was on (keys sort by bytes: `data-1.csv` and `data.zip` come before the prefix `data/`).
    private struct Gathered {
        var folders = ListingRecords.Writer()
        var files = ListingRecords.Writer()
        var pages = 0
        var tokens = Set<String>()
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
        let sink = ListingSink(limit: limit, deadline: deadline, keepingErrorBodies: true) { [self] result in
            // Pages are read off the fetcher's thread, which serves every transfer of the mount.
            DispatchQueue.global(qos: .utility).async { [self] in read(result, after: token, attempt: attempt) }
        }
        fetcher.start(request, sink: sink)
    }

    private func read(_ result: Result<(status: Int, body: [UInt8], cut: Bool), FetchError>, after token: String?, attempt: Int) {
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
        guard let page = ObjectListingXML.page(answer.body) else {
            return completion(.failure(.badListing("the answer to ListObjectsV2 is not a ListBucketResult")))
        }
        let step = state.withLock { state -> Result<String?, FetchError> in
            state.pages += 1
            write(page, into: &state)
            guard state.folders.bytes.count + state.files.bytes.count <= limit else {
                return .failure(.listingTooLarge(limit))
            }
            guard page.isTruncated else { return .success(nil) }
            // A page that says more follow but not where: taking it for the end would drop the rest from the tree
            // (and from the kept listing).
            guard let token = page.nextContinuationToken, !token.isEmpty else {
                return .failure(.badListing("page \(state.pages) says more keys follow but gives no continuation token"))
            }
            guard state.pages < Self.maximumPages, state.tokens.insert(token).inserted else {
                return .failure(.badListing("the store's pages do not end (page \(state.pages))"))
            }
            return .success(token)
        }
        switch step {
        case .failure(let error): completion(.failure(error))
        case .success(let following?):
            // The first page (asked with no token) read, and more follow: the directory is known to be one.
            if token == nil, let firstPage { firstPage() }
            next(after: following)
        case .success(nil):
            // One buffer of the final size, the records let go as soon as they are in it.
            let body = state.withLock { state in
                var parts = [state.folders, state.files]
                state.folders = ListingRecords.Writer()
                state.files = ListingRecords.Writer()
                return ListingRecords.joined(&parts)
            }
            completion(.success(body))
        }
    }

    /// A page failed: asked again after the retry rule's delay when the failure may pass (`SlowDown`, a 5xx, an
    /// expired session key that the next attempt signs anew, a dropped connection), else the listing fails.
    private func failed(_ error: FetchError, after token: String?, attempt: Int) {
        guard let delay = policy.retry(after: error, attempt: attempt) else { return completion(.failure(error)) }
        guard !deadline.isPast else { return completion(.failure(deadline.error)) }
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

    /// Writes the page's subdirectories and objects as records (listed folders first: a key that is also a
    /// prefix, `a` beside `a/b`, shows as the folder, and the object of the same name is left out by the reader).
    /// Keys are cut by bytes: a key whose next character after the prefix is a combining mark is still under it.
    private func write(_ page: ObjectListingPage, into gathered: inout Gathered) {
        for common in page.commonPrefixes {
            guard let rest = below(common) else { continue }
            gathered.folders.append(name: rest.trimmed(while: { $0 == "/" }), isDirectory: true)
        }
        for object in page.objects {
            guard let name = below(object.key), !name.isEmpty else { continue }  // the folder's own marker
            gathered.files.append(name: name, isDirectory: false, size: object.size,
                                  modificationTime: object.lastModified.flatMap(RFC3339.parse), datePrecision: .second,
                                  etag: object.etag.map { "\"" + $0 + "\"" })
        }
    }

    /// `key` after the listed prefix, by bytes; nil when it is not under it.
    private func below(_ key: String) -> String? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: key.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }
}
