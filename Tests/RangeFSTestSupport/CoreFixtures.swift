// Shared by the core's unit tests: a RangeFS over an in-memory origin, and a blocking read for assertions.

import Dispatch
import Foundation
import Glibc
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSFileSystem
@testable import RangeFSSystem

/// A RangeFS that serves `urls` from `origin`, with its cache in `directory`, logging to `logger`; with `root`,
/// its root is that directory URL (listed on its first visit, through `credentials` if an object store's).
/// `adjust` changes the settings last (the tests' defaults: 64 KiB blocks, no background check);
/// `schedulerLockTaken` observes each taking of the scheduler's lock.
public func makeTestFileSystem(origin: MemoryOrigin, urls: [String], directory: String, root: String? = nil,
                               credentials: CredentialTable = CredentialTable(),
                               policy: FetchPolicy = FetchPolicy(), prefetch: PrefetchPolicy = .none,
                               storeSettings: StoreSettings = StoreSettings(),
                               kernel: any KernelNotifier = NoKernel(),
                               passthrough: LockedBox<PassthroughMode> = LockedBox(PassthroughMode.pending),
                               metrics: Metrics = Metrics(),
                               logger: Logger = Logger(label: "test"),
                               schedulerLockTaken: (@Sendable () -> Void)? = nil,
                               reportGate: ReportGate? = nil,
                               adjust: (inout FileSystemSettings) -> Void = { _ in }) throws -> RangeFS {
    // The store and the scheduler report to the file system through `reports`, as a mount wires them; through
    // `reportGate`, which may hold some back, if the test gives one.
    let reports = EventQueue<EntryEvent>()
    let below = reportGate?.start(forwardingTo: reports) ?? reports
    let store = try CacheStore(root: directory, settings: storeSettings, reports: below, metrics: metrics,
                               logger: logger)
    let catalog = Catalog()
    catalog.setRootURL(root)
    for result in origin.probeAll(urls) { catalog.add(try result.get()) }
    var schedulerEvents = FetchScheduler.Events(reports: below)
    schedulerEvents.lockTaken = schedulerLockTaken
    let scheduler = FetchScheduler(fetcher: origin, policy: policy, events: schedulerEvents, metrics: metrics,
                                   logger: logger)
    var settings = FileSystemSettings()
    settings.blockSize = 65536
    settings.prefetch = prefetch
    settings.revalidateAfter = nil  // tests probe only when they mean to
    adjust(&settings)
    return RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports, kernel: kernel,
                   passthrough: passthrough, settings: settings, credentials: credentials, logger: logger)
}

/// Stands between the store (and the scheduler) and the file system's reports in a test, as a busy machine's
/// report thread does: each report that `holds` picks is held back until `release`, and the reports after it wait
/// behind it, in order. Once released, nothing is held any more.
public final class ReportGate: Sendable {
    private let holds: @Sendable (EntryEvent) -> Bool
    private let released = LockedBox(false)
    private let opened = DispatchSemaphore(value: 0)
    /// Signalled as each held report arrives.
    public let held = DispatchSemaphore(value: 0)

    public init(holding holds: @escaping @Sendable (EntryEvent) -> Bool) {
        self.holds = holds
    }

    /// The held report and those behind it go on to the file system, and every report after them.
    public func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { opened.signal() }
    }

    /// The queue the store and the scheduler send into, drained by a thread of its own into `above`. Nobody
    /// closes it: the thread waits for the rest of the test process (one idle thread per test that holds reports).
    func start(forwardingTo above: EventQueue<EntryEvent>) -> EventQueue<EntryEvent> {
        let below = EventQueue<EntryEvent>()
        let (holds, released, opened, held) = (holds, released, opened, held)
        let thread = Thread {
            while let event = below.next() {
                if !released.withLock({ $0 }) && holds(event) {
                    held.signal()
                    opened.wait()
                }
                above.send(event)
            }
        }
        thread.start()
        return below
    }
}

/// Runs `body` with the file system `make` makes, closes its store as an unmount does, and waits (up to 60 s)
/// until that store is gone; returns whether it went. The next file system on the same cache takes the cache's
/// lock, which a store holds until its `deinit`, and work still queued on a busy machine (a fetch ahead's
/// preparation, a probe's or a broken stream's last reply) holds the store a moment after `body` returns: two busy
/// cores made the next mount fail with "in use by another rangefs".
@discardableResult
public func withFileSystem(_ make: () throws -> RangeFS, _ body: (RangeFS) throws -> Void) throws -> Bool {
    weak var store: CacheStore?
    try {
        let fileSystem = try make()
        store = fileSystem.store
        defer { _ = fileSystem.store.close() }
        try body(fileSystem)
    }()
    var waited = 0
    while store != nil && waited < 6000 {
        usleep(10_000)
        waited += 1
    }
    return store == nil
}

extension RangeFS {
    /// Reads like the FUSE adapter does and waits for the answer; nil if none came within `timeout` seconds.
    public func readSynchronously(handle: UInt64, offset: UInt64, count: Int,
                                  timeout: Double = 10) -> Result<[UInt8], FileSystemError>? {
        let done = DispatchSemaphore(value: 0)
        let box = LockedBox<Result<[UInt8], FileSystemError>?>(nil)
        read(handle: handle, offset: offset, count: count) { reply in
            let value = reply.map { $0.bytesForTesting() }
            box.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        return box.withLock { $0 }
    }

    /// Reads `handle` to its end as `cp` does through direct I/O, `count` bytes at a time until an empty read: the
    /// bytes, the first failure, or nil if a read was not answered within `timeout` seconds.
    public func readToEnd(handle: UInt64, count: Int = 128 << 10,
                          timeout: Double = 60) -> Result<[UInt8], FileSystemError>? {
        var copy: [UInt8] = []
        while true {
            switch readSynchronously(handle: handle, offset: UInt64(copy.count), count: count, timeout: timeout) {
            case nil: return nil
            case .failure(let error): return .failure(error)
            case .success(let piece) where piece.isEmpty: return .success(copy)
            case .success(let piece): copy += piece
            }
        }
    }
}

extension RangeFS {
    /// Waits for `body`'s reply, as the FUSE adapter would receive it; `.io` if none came within `timeout` seconds.
    private static func waitForReply<Value: Sendable>(
        timeout: Double = 30, _ body: (@escaping @Sendable (Result<Value, FileSystemError>) -> Void) -> Void
    ) -> Result<Value, FileSystemError> {
        let done = DispatchSemaphore(value: 0)
        let box = LockedBox<Result<Value, FileSystemError>?>(nil)
        body { result in
            box.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { return .failure(.io("no reply in time")) }
        return box.withLock { $0! }
    }

    /// `lookup(parent:name:reply:)`, waited for.
    public func lookup(parent: UInt64, name: String) -> Result<FileAttributes, FileSystemError> {
        Self.waitForReply { lookup(parent: parent, name: name, reply: $0) }
    }

    /// `open(_:reply:)`, waited for.
    public func open(_ inode: UInt64) -> Result<OpenedFile, FileSystemError> {
        Self.waitForReply { open(inode, reply: $0) }
    }

    /// The children of directory `inode` once it is listed, as readdir sees them.
    public func directoryContents(_ inode: UInt64) -> Result<[CatalogNode], FileSystemError> {
        Self.waitForReply { whenListed(inode, reply: $0) }.map { count in children(of: inode, from: 0, count: count) }
    }
}

extension ReadReply {
    /// The bytes a reply sends. Tests read the cache file's mapping directly; the daemon never does (see
    /// FileMapping).
    public func bytesForTesting() -> [UInt8] {
        func read(_ address: UInt, _ count: Int) -> [UInt8] {
            Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count))
        }
        switch self {
        case .bytes(let bytes): return bytes
        case .mapped(let address, let count): return read(address, count)
        case .segments(let segments): return segments.flatMap { read($0.address, $0.count) }
        case .file(let lease, let offset, let count):
            var buffer = [UInt8](repeating: 0, count: count)
            let got = pread(lease.descriptor, &buffer, count, off_t(offset))
            return Array(buffer.prefix(max(0, got)))
        }
    }
}

/// Mounts the listed folder `root` of `origin` on the cache at `cache` as a mount would (its block size and
/// prefetching; no background check), lists it, hands `use` the file system and its catalog, and closes the
/// store: a second call on the same cache is a remount.
public func withListedFolder(_ root: String, of origin: MemoryOrigin, cache: String,
                             storeSettings: StoreSettings = StoreSettings(), kernel: any KernelNotifier = NoKernel(),
                             _ use: (RangeFS, Catalog) throws -> Void) throws {
    let logger = Logger(label: "test")
    let reports = EventQueue<EntryEvent>()
    let store = try CacheStore(root: cache, settings: storeSettings, reports: reports, logger: logger)
    defer {
        store.markStopping()
        store.close()
    }
    let catalog = Catalog()
    catalog.setRootURL(root)
    var settings = FileSystemSettings()
    settings.revalidateAfter = nil
    let scheduler = FetchScheduler(fetcher: origin, policy: FetchPolicy(), events: FetchScheduler.Events(reports: reports), logger: logger)
    let mounted = RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports, kernel: kernel,
                          settings: settings, logger: logger)
    _ = try mounted.directoryContents(Catalog.rootInode).get()
    try use(mounted, catalog)
}
