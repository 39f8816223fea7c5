import Foundation
import Logging
@testable import RangeFSCache
@testable import RangeFSCatalog
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Issue 46: the attributes of a file whose open cache entry is complete, and that nothing takes blocks from, stay
/// in the kernel as a closed entry's do. With them kept for no time, `cat` of a cached small file after a remount
/// cost three GETATTRs (its `fstat`, and a read at and past the end each asking for the size again), and the open
/// of each entry told the kernel to drop what it held. A file still filling, or under a cap, is asked each time, so
/// that `ls -s` and `du` follow it (issue 35).
final class SettledAttributesTests: XCTestCase {
    let origin = MemoryOrigin()
    let folder = "http://origin/exact/"
    let bytes = pseudoRandomBytes(count: 5000, seed: 46)
    var cache: TemporaryDirectory!

    override func setUpWithError() throws {
        cache = try TemporaryDirectory(prefix: "settled")
        let listing = #"[{"name":"d.bin","type":"file","mtime":"\#(origin.lastModified)","size":5000},"#
            + #"{"name":"big.bin","type":"file","mtime":"\#(origin.lastModified)","size":3000000}]"#
        origin.serve(folder, bytes: Array(listing.utf8))
        origin.serve(folder + "d.bin", bytes: bytes)
        origin.serve(folder + "big.bin", bytes: pseudoRandomBytes(count: 3_000_000, seed: 47))
    }

    override func tearDown() {
        cache = nil
        super.tearDown()
    }

    /// Mounts the folder on the test's cache (a remount after the first), with `maxBytes` as the cap, and hands
    /// `use` the file system, what it told the kernel, and the listed file `name`.
    private func mount(maxBytes: Int? = nil, file name: String = "d.bin",
                       _ use: (RangeFS, KernelRecorder, CatalogItem) throws -> Void) throws {
        var storeSettings = StoreSettings()
        storeSettings.maxBytes = maxBytes
        let kernel = KernelRecorder()
        try withListedFolder(folder, of: origin, cache: cache.path, storeSettings: storeSettings, kernel: kernel) {
            mounted, catalog in
            guard case .file(let item) = catalog.node(named: name, in: Catalog.rootInode) else {
                return XCTFail("no \(name) listed")
            }
            try use(mounted, kernel, item)
        }
    }

    /// Reads the whole of `item` through a handle and checks its bytes; the handle stays open during `whileOpen`.
    private func readWhole(_ mounted: RangeFS, _ item: CatalogItem, whileOpen: () throws -> Void = {}) throws {
        let handle = try mounted.open(item.inode).get().handle
        defer { mounted.release(handle) }
        XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: bytes.count)?.get(), bytes)
        try whileOpen()
    }

    func testACompleteCachedFileKeepsItsAttributesInTheKernelWhileOpenAfterARemount() throws {
        try mount { mounted, _, item in try readWhole(mounted, item) }
        try mount { mounted, kernel, item in
            let looked = try mounted.lookup(parent: Catalog.rootInode, name: "d.bin").get()
            XCTAssertEqual(looked.cachedBytes, 5000)
            XCTAssertGreaterThan(looked.kernelCacheSeconds, 0)
            try readWhole(mounted, item) {
                let open = try mounted.attributes(of: item.inode).get()
                XCTAssertEqual(open.cachedBytes, 5000)
                // On the main before this change: 0, so each fstat and read past the end asked the daemon again.
                XCTAssertGreaterThan(open.kernelCacheSeconds, 0, "kept while its complete entry is open")
            }
            mounted.kernel.flush()  // every notice queued so far reached the recorder
            XCTAssertEqual(kernel.notices.filter { $0 == .attributes(item.inode) }, [],
                           "its complete entry opened: nothing the kernel holds of it changed")
        }
    }

    func testAnEntryStillFillingIsAskedEachTimeAndTheKernelDropsWhatItHeld() throws {
        try mount(file: "big.bin") { mounted, kernel, item in
            let entry = try mounted.entry(for: item)
            XCTAssertLessThan(entry.cachedBytes, 3_000_000)
            let open = try mounted.attributes(of: item.inode).get()
            XCTAssertEqual(open.kernelCacheSeconds, 0, "its cached bytes change as it fills: asked each time")
            kernel.wait { $0 == .attributes(item.inode) }
            XCTAssertEqual(kernel.notices.filter { $0 == .attributes(item.inode) }, [.attributes(item.inode)],
                           "the kernel was told to drop the attributes it held")
        }
    }

    func testUnderACapACompleteOpenEntryIsAskedEachTime() throws {
        try mount(maxBytes: 1 << 30) { mounted, _, item in try readWhole(mounted, item) }
        try mount(maxBytes: 1 << 30) { mounted, kernel, item in
            try readWhole(mounted, item) {
                let open = try mounted.attributes(of: item.inode).get()
                XCTAssertEqual(open.cachedBytes, 5000)
                XCTAssertEqual(open.kernelCacheSeconds, 0, "eviction may take its blocks: asked each time")
            }
            // The notice goes through the kernel queue, off the opening thread: waited for, not raced.
            kernel.wait { $0 == .attributes(item.inode) }
            XCTAssertEqual(kernel.notices.filter { $0 == .attributes(item.inode) }, [.attributes(item.inode)])
        }
    }

    /// Issue 45's promise, kept with the prefetch on its own thread: a fetch ahead's probe that finds another size
    /// than the listing's, and ends between the kernel's lookup and the open, queued its notice to drop the listed
    /// size when the entry opened. The open answered before that notice reached the kernel (a busy machine's: the
    /// recorder takes 2 s a notice), and a first `cat` stopped at the listed size (`VersionMixTests` in CI). The
    /// open now sends a notice still queued before it answers.
    func testAnOpenAnswersOnlyOnceTheKernelWasToldOfASizeAProbeFound() throws {
        let stale = serveListingOneHundredShort(at: "http://origin/stale/")
        let kernel = KernelRecorder(delay: 2)
        try withListedFolder(stale, of: origin, cache: cache.path, kernel: kernel) { mounted, catalog in
            guard case .file(let listed) = catalog.node(named: "s.bin", in: Catalog.rootInode) else {
                return XCTFail("no s.bin listed")
            }
            XCTAssertEqual(listed.metadata.size, 4900)
            // The fetch ahead: its probe finds 5000 bytes and stores them, which opens the entry.
            try fetchAhead(listed, in: mounted)
            try openAnswersAfterTheNotice(listed, in: mounted, kernel: kernel)
        }
    }

    /// The same promise with the server out of reach: the fetch ahead's probe fails, and the file is served from
    /// its cache entry, whose size (5000) is not the listing's (4900). The catalog takes the entry's size; the open
    /// must not answer before the kernel was told to drop the listed one (the review of this change found the
    /// offline answer taken without that notice).
    func testAnOpenAnswersOnlyOnceTheKernelWasToldOfTheSizeItsCacheEntryHolds() throws {
        let stale = serveListingOneHundredShort(at: "http://origin/offline/")
        try withListedFolder(stale, of: origin, cache: cache.path) { mounted, catalog in
            let item = try XCTUnwrap(catalog.items.first)
            let handle = try mounted.open(item.inode).get().handle
            defer { mounted.release(handle) }
            XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 6000)?.get(), bytes)
        }
        let kernel = KernelRecorder(delay: 2)
        try withListedFolder(stale, of: origin, cache: cache.path, kernel: kernel) { mounted, catalog in
            guard case .file(let listed) = catalog.node(named: "s.bin", in: Catalog.rootInode) else {
                return XCTFail("no s.bin listed")
            }
            XCTAssertEqual(listed.metadata.size, 4900)
            origin.isDown = true
            defer { origin.isDown = false }
            try fetchAhead(listed, in: mounted)  // the cache entry's size
            try openAnswersAfterTheNotice(listed, in: mounted, kernel: kernel)
        }
    }

    /// The other side of the test above: a fetch ahead whose probe found the listed size queues only the notice
    /// of its entry's opening (its cached bytes change), and the open answers without waiting for it. Sending any
    /// queued notice at the open made the kernel drop the attributes its lookup had just got: 0.84 GETATTR per
    /// file in a cold `xargs cat` of 3,000 files. Here notices are held: an open that waited would never answer.
    func testAnOpenOfAFileFetchedAheadAtItsListedSizeWaitsForNoNotice() throws {
        let kernel = KernelRecorder(holding: true)
        try withListedFolder(folder, of: origin, cache: cache.path, kernel: kernel) { mounted, catalog in
            defer { kernel.release() }
            guard case .file(let listed) = catalog.node(named: "d.bin", in: Catalog.rootInode) else {
                return XCTFail("no d.bin listed")
            }
            try fetchAhead(listed, in: mounted)
            let handle = try mounted.open(listed.inode).get().handle
            defer { mounted.release(handle) }
            XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 6000)?.get(), bytes)
            XCTAssertEqual(kernel.notices, [], "nothing reached the kernel while the notices were held")
            kernel.release()
            kernel.wait { $0 == .attributes(listed.inode) }
            XCTAssertTrue(kernel.notices.contains(.attributes(listed.inode)), "the queued notice still goes")
        }
    }

    /// Fetches `listed` ahead as the directory prefetch does, and checks that its probe found 5000 bytes.
    private func fetchAhead(_ listed: CatalogItem, in mounted: RangeFS) throws {
        let fetched = DispatchSemaphore(value: 0)
        mounted.directories.fetchAhead(listed) { fetched.signal() }
        XCTAssertEqual(fetched.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(mounted.catalog.item(inode: listed.inode)?.metadata.size, 5000)
    }

    /// Serves a listing at `folder` that states 4900 bytes for s.bin, whose 5000 bytes it serves too; returns
    /// `folder`.
    private func serveListingOneHundredShort(at folder: String) -> String {
        let listing = #"[{"name":"s.bin","type":"file","mtime":"\#(origin.lastModified)","size":4900}]"#
        origin.serve(folder, bytes: Array(listing.utf8))
        origin.serve(folder + "s.bin", bytes: bytes)
        return folder
    }

    /// Opens `listed`, checks that the kernel was told to drop its listed size by the time the open answered, and
    /// reads all 5000 bytes.
    private func openAnswersAfterTheNotice(_ listed: CatalogItem, in mounted: RangeFS, kernel: KernelRecorder) throws {
        let handle = try mounted.open(listed.inode).get().handle
        defer { mounted.release(handle) }
        XCTAssertTrue(kernel.notices.contains(.attributes(listed.inode)),
                      "the open answered before the kernel was told to drop the listed size: \(kernel.notices)")
        XCTAssertEqual(try mounted.readSynchronously(handle: handle, offset: 0, count: 6000)?.get(), bytes)
    }
}
