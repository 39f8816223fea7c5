import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 46, "a listing is a check when it can be" (Catalog/ListedDate.swift): after an unmount and a remount, a
/// cached file whose nginx HTML listing states its size and a minute that ended before the server answered with
/// the cached version opens with no request and no background check; a file changed since is still checked.
/// Default options; requests counted from nginx's own access log.
final class ListingCheckTests: MountTestCase {
    /// Files written with their modification time `age` seconds back, under `folder` of the document root; their
    /// bytes by name.
    func serveFiles(_ folder: String, count: Int, age: TimeInterval, atLeast minimum: Int = 0) throws -> [String: Data] {
        try FileManager.default.createDirectory(atPath: origin.path(folder), withIntermediateDirectories: true)
        var files: [String: Data] = [:]
        for index in 0..<count {
            let name = String(format: "f%03d.bin", index)
            // 1 to 60 KB (past `minimum`), each size its own.
            let size = minimum + 1_000 + (index * 7_919) % 59_000
            files[name] = try write(folder + "/" + name, Data(pseudoRandomBytes(count: size, seed: UInt64(index + 1))),
                                    age: age)
        }
        return files
    }

    /// Writes `bytes` as `name` under the document root, dated `age` seconds back; returns them.
    @discardableResult
    func write(_ name: String, _ bytes: Data, age: TimeInterval) throws -> Data {
        try bytes.write(to: URL(fileURLWithPath: origin.path(name)))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)],
                                              ofItemAtPath: origin.path(name))
        return bytes
    }

    /// The bytes of `name` in the mount, read with a fresh open.
    func mounted(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: mountpoint + "/" + name))
    }

    func testARemountReadsFilesItsListingShowsUnchangedWithNoRequest() throws {
        let folder = "listed/remount"
        var files = try serveFiles(folder, count: 50, age: 600)
        // A file changed just now: it is cached within the minute its listing states, and changed again after (2 s
        // later by its date, so that nginx's ETag and Last-Modified, to the second, show the change).
        files["fresh.bin"] = try write(folder + "/fresh.bin", Data(pseudoRandomBytes(count: 20_000, seed: 100)), age: 2)
        files["resized.bin"] = try write(folder + "/resized.bin", Data(pseudoRandomBytes(count: 30_000, seed: 101)),
                                         age: 600)
        try mount([origin.url(folder + "/")])
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(try mounted(name), bytes, "\(name), first read")
        }
        try driver.unmount(mountpoint, cache: cache)

        // Changed while unmounted: the same size and a date in the minute of its cached version, and another size.
        let fresh = try write(folder + "/fresh.bin", Data(pseudoRandomBytes(count: 20_000, seed: 200)), age: 0)
        let resized = try write(folder + "/resized.bin", Data(pseudoRandomBytes(count: 31_000, seed: 201)), age: 0)
        origin.clearAccessLog()
        try mount([origin.url(folder + "/")])
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) where name.hasPrefix("f0") {
            XCTAssertEqual(try mounted(name), bytes, "\(name), read after the remount")
        }
        XCTAssertEqual(try mounted("resized.bin"), resized, "a file of another size is read anew at once")
        // The change of a file of the same size is found by the open's background check: a reopen reads it.
        // A read that the check's answer overtakes gets ESTALE (the old version's handle): it reads again.
        _ = try? mounted("fresh.bin")
        let deadline = Date().addingTimeInterval(60)
        while (try? mounted("fresh.bin")) != fresh, Date() < deadline { usleep(100_000) }
        XCTAssertEqual(try mounted("fresh.bin"), fresh, "a file changed since it was cached was never checked")

        let requests = origin.accessLog().filter { $0.path.hasPrefix("/\(folder)/") && $0.path != "/\(folder)/" }
        XCTAssertEqual(requests.filter { $0.path.contains("/f0") }.map(\.path), [],
                       "files whose listing shows them unchanged were asked for after the remount")
        XCTAssertTrue(requests.contains { $0.path.hasSuffix("/fresh.bin") }, "the changed file was checked: \(requests)")
    }

    /// With the listing as the check and the blocks checked in one pass at the open (CacheEntry+OnePassCheck.swift),
    /// the first open after a remount of a complete small file its listing shows unchanged is passed through to the
    /// kernel: its reads never reach the daemon, and its server is asked nothing.
    func testTheFirstOpenAfterARemountOfAFileItsListingVouchesForIsPassedThrough() throws {
        let folder = "listed/through"
        // Larger than a small entry (1 MiB), which is never passed through (CacheFormat.swift).
        let files = try serveFiles(folder, count: 3, age: 600, atLeast: 2 << 20)
        try mount([origin.url(folder + "/")])
        for (name, bytes) in files { XCTAssertEqual(try mounted(name), bytes, "\(name), first read") }
        try driver.unmount(mountpoint, cache: cache)

        origin.clearAccessLog()
        try mount([origin.url(folder + "/")])
        let path = mountpoint + "/f001.bin"
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: path))
        defer { try? handle.close() }
        let shown = try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.passthrough_handles", path])
        XCTAssertEqual(shown.stdout, "1", "the first open after the remount was not passed through: \(shown.stderr)")
        XCTAssertEqual(try handle.readToEnd(), files["f001.bin"])
        let requests = origin.accessLog().filter { $0.path.hasPrefix("/\(folder)/f") }
        XCTAssertEqual(requests.map(\.path), [], "the file was asked for after the remount")
    }
}
