// The filesystem, without FUSE: every operation the adapter forwards, on plain Swift types. The adapter copies the
// kernel's arguments in, calls one method here, and turns the result into a reply; everything worth testing is here.
//
// A read whose blocks are all present is answered at once from the data file. Otherwise the blocks nobody is
// fetching yet are requested at demand priority, and the reply is sent from the thread that stores the last
// needed block. Each open handle has its own readahead window, so two streams over one file do not confuse it.

import Glibc
import Logging
import Synchronization

/// Attributes of one file or of the root directory.
public struct FileAttributes: Sendable, Equatable {
    public var inode: UInt64
    public var isDirectory: Bool
    public var size: UInt64
    /// Bytes present locally; `st_blocks` is this divided by 512, rounded up.
    public var cachedBytes: UInt64
    /// Seconds since 1970.
    public var modificationTime: Int64
}

/// What a successful read hands back to the adapter.
public enum ReadReply: Sendable {
    /// `count` bytes at `offset` of the file behind `descriptor`, all present: reply straight from it.
    case file(descriptor: Int32, offset: UInt64, count: Int)
}

/// A mounted set of remote files, backed by a cache.
public final class RangeFS: Sendable {
    public let catalog: Catalog
    public let store: CacheStore
    public let scheduler: FetchScheduler
    /// Block size for entries created by this mount.
    public let blockSize: Int
    /// When the mount started, the root directory's time.
    public let mountTime: Int64
    private let handles = Mutex(Handles())
    private let logger: Logger

    private struct OpenFile {
        let inode: UInt64
        let entry: CacheEntry
        var readahead = ReadaheadWindow()
    }

    private struct Handles {
        var next: UInt64 = 1
        var open: [UInt64: OpenFile] = [:]
    }

    public init(catalog: Catalog, store: CacheStore, scheduler: FetchScheduler, blockSize: Int, logger: Logger) {
        self.catalog = catalog
        self.store = store
        self.scheduler = scheduler
        self.blockSize = blockSize
        self.logger = logger
        mountTime = Int64(time(nil))
    }

    // MARK: Names and attributes

    public func lookup(parent: UInt64, name: String) -> Result<FileAttributes, FileSystemError> {
        guard parent == Catalog.rootInode else { return .failure(.notADirectory) }
        guard let item = catalog.item(named: name) else { return .failure(.notFound) }
        return attributes(of: item.inode)
    }

    public func attributes(of inode: UInt64) -> Result<FileAttributes, FileSystemError> {
        if inode == Catalog.rootInode {
            return .success(FileAttributes(inode: inode, isDirectory: true, size: 0, cachedBytes: 0,
                                           modificationTime: mountTime))
        }
        guard let item = catalog.item(inode: inode) else { return .failure(.notFound) }
        let cached = (try? entry(for: item).cachedBytes) ?? 0
        return .success(FileAttributes(inode: inode, isDirectory: false, size: item.metadata.size,
                                       cachedBytes: cached,
                                       modificationTime: item.metadata.modificationTime ?? mountTime))
    }

    /// The root directory's files, sorted by name.
    public func listDirectory(_ inode: UInt64) -> Result<[CatalogItem], FileSystemError> {
        guard inode == Catalog.rootInode else { return .failure(.notADirectory) }
        return .success(catalog.items)
    }

    // MARK: Open, read, release

    /// Opens a file for reading and returns its handle.
    public func open(_ inode: UInt64) -> Result<UInt64, FileSystemError> {
        if inode == Catalog.rootInode { return .failure(.isADirectory) }
        guard let item = catalog.item(inode: inode) else { return .failure(.notFound) }
        let cacheEntry: CacheEntry
        do {
            cacheEntry = try entry(for: item)
        } catch {
            logger.error("cannot open the cache for \(item.name): \(error)")
            return .failure(.io(error.description))
        }
        return .success(handles.withLock { handles in
            let handle = handles.next
            handles.next += 1
            handles.open[handle] = OpenFile(inode: inode, entry: cacheEntry)
            return handle
        })
    }

    public func release(_ handle: UInt64) {
        _ = handles.withLock { $0.open.removeValue(forKey: handle) }
    }

    /// Reads `count` bytes at `offset`; `reply` runs exactly once, now or when the blocks arrive.
    public func read(handle: UInt64, offset: UInt64, count: Int,
                     reply: @escaping @Sendable (Result<ReadReply, FileSystemError>) -> Void) {
        let opened = handles.withLock { handles -> (CacheEntry, UInt64)? in
            guard var file = handles.open[handle] else { return nil }
            let ahead = file.readahead.observe(offset: offset, count: count)
            handles.open[handle] = file
            return (file.entry, ahead)
        }
        guard let (entry, ahead) = opened else { return reply(.failure(.badHandle)) }
        let end = min(entry.size, offset + UInt64(count))
        guard offset < end else {
            return reply(.success(.file(descriptor: entry.dataDescriptor, offset: offset, count: 0)))
        }
        let url = entry.header.url
        let blocks = entry.blocks(covering: offset..<end)
        var claimed: [Range<Int>] = []
        let ready = entry.request(blocks: blocks, claimed: &claimed) { result in
            switch result {
            case .success:
                reply(.success(.file(descriptor: entry.dataDescriptor, offset: offset, count: Int(end - offset))))
            case .failure(let error):
                reply(.failure(Self.fileSystemError(for: error)))
            }
        }
        if !claimed.isEmpty {
            scheduler.fetch(entry, url: url, runs: claimed, priority: .demand)
        }
        if !ready {
            scheduler.promote(entry, blocks: blocks)
        }
        if ahead > 0 && end < entry.size {
            let runs = entry.claim(blocks: entry.blocks(covering: end..<min(entry.size, end + ahead)))
            if !runs.isEmpty { scheduler.fetch(entry, url: url, runs: runs, priority: .readahead) }
        }
        if ready {
            reply(.success(.file(descriptor: entry.dataDescriptor, offset: offset, count: Int(end - offset))))
        }
    }

    static func fileSystemError(for error: FetchError) -> FileSystemError {
        switch error {
        case .remoteChanged: .stale
        case .cacheWrite(let message) where message.contains("No space"): .noSpace
        default: .io(error.userMessage)
        }
    }

    // MARK: Extended attributes

    public static let attributeNames = [
        "user.rangefs.url", "user.rangefs.state", "user.rangefs.progress", "user.rangefs.cached_bytes",
        "user.rangefs.etag",
    ]

    public func extendedAttributeNames(of inode: UInt64) -> Result<[String], FileSystemError> {
        if inode == Catalog.rootInode { return .success([]) }
        guard catalog.item(inode: inode) != nil else { return .failure(.notFound) }
        return .success(Self.attributeNames)
    }

    public func extendedAttribute(_ name: String, of inode: UInt64) -> Result<String, FileSystemError> {
        guard let item = catalog.item(inode: inode) else {
            return .failure(inode == Catalog.rootInode ? .noSuchAttribute : .notFound)
        }
        let cached = (try? entry(for: item).cachedBytes) ?? 0
        let size = item.metadata.size
        switch name {
        case "user.rangefs.url": return .success(Redaction.redact(item.metadata.url))
        case "user.rangefs.etag": return .success(item.metadata.etag)
        case "user.rangefs.cached_bytes": return .success(String(cached))
        case "user.rangefs.progress": return .success(Self.percent(cached, of: size))
        case "user.rangefs.state":
            return .success(cached == size ? "complete" : cached == 0 ? "empty" : "partial")
        default: return .failure(.noSuchAttribute)
        }
    }

    /// `cached` of `size` as a percentage with one decimal, e.g. "42.5%"; an empty file is "100.0%".
    public static func percent(_ cached: UInt64, of size: UInt64) -> String {
        guard size > 0 else { return "100.0%" }
        let tenths = cached * 1000 / size
        return "\(tenths / 10).\(tenths % 10)%"
    }

    // MARK: Cache entries

    /// The cache entry of `item`, opened on first use so that mounting does no work per cached file.
    public func entry(for item: CatalogItem) throws(CacheError) -> CacheEntry {
        try store.entry(for: item.metadata, blockSize: blockSize)
    }
}
