import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// The README's "Many machines" configuration, as it is given there: several clients mount the origin's URL
/// through a proxy group of two nginx slice caches (`--proxy 'A|B'`). Each block goes to the same cache from every
/// client, so the origin sends each slice about once; when one cache dies, the other serves its share.
final class ManyMachinesTests: MountTestCase {
    /// An nginx slice cache that forwards to whatever host a proxied request names (docs/many-machines.md).
    func sliceCache() throws -> NginxOrigin {
        var extras = NginxOrigin.Extras()
        extras.http = { _, prefix in
            "proxy_cache_path \(prefix)/slices levels=1:2 keys_zone=slices:10m max_size=4g inactive=1h use_temp_path=off;"
        }
        extras.locations = { _, _ in SliceCache.location(upstream: "http://$http_host", key: "$http_host") }
        return try NginxOrigin(extras)
    }

    func testThreeClientsBehindAGroupOfTwoSliceCachesFetchEachSliceOnceAndSurviveACacheDying() throws {
        let size = 96 << 20
        let expected = try origin.serveRandomFile("library.bin", size: size)
        origin.clearAccessLog()
        let caches = try [sliceCache(), sliceCache()]
        defer { caches.forEach { $0.stop() } }
        let group = caches.map { "http://127.0.0.1:\($0.port)" }.joined(separator: "|")

        var clients: [(mountpoint: String, cache: String)] = []
        for index in 0..<3 {
            let client = (scratch.path + "/mnt\(index)", scratch.path + "/cache\(index)")
            let result = try driver.mount(client.0, urls: [origin.url("library.bin")], cache: client.1,
                                          extra: ["--proxy", group])
            XCTAssertEqual(result.status, 0, result.stderr)
            clients.append(client)
        }
        let copies = try clients.enumerated().map { index, client in
            try BackgroundProcess("/bin/cp", [client.mountpoint + "/library.bin", scratch.path + "/copy\(index)"])
        }
        for copy in copies { XCTAssertEqual(copy.waitForExit(timeout: 300), 0, "a copy failed or hung") }
        for index in clients.indices {
            XCTAssertEqual(try Shell.sha256(of: scratch.path + "/copy\(index)"), expected, "client \(index)")
        }
        // Both caches carried part of it, and the origin sent each slice about once for the three clients.
        for (index, cache) in caches.enumerated() {
            XCTAssertGreaterThan(cache.bodyBytesSent(path: "/library.bin"), UInt64(8 << 20), "cache \(index) carried little")
        }
        let sent = origin.bodyBytesSent(path: "/library.bin")
        XCTAssertLessThanOrEqual(Double(sent), 1.05 * Double(size), "the origin sent \(sent) bytes for 3 copies of \(size)")

        // The first cache dies. A client that drops its copy reads the file again: the second cache serves all of
        // it, the bytes are right, and status names the failed proxy.
        caches[0].stop()
        let evicted = try driver.run(["evict", "library.bin", "--mount", clients[0].mountpoint])
        XCTAssertEqual(evicted.status, 0, evicted.stderr)
        let before = caches[1].bodyBytesSent(path: "/library.bin")
        XCTAssertEqual(try Shell.sha256(of: clients[0].mountpoint + "/library.bin"), expected)
        XCTAssertGreaterThanOrEqual(caches[1].bodyBytesSent(path: "/library.bin") - before, UInt64(size))
        let status = try driver.run(["status", clients[0].mountpoint])
        XCTAssertTrue(status.stdout.contains("127.0.0.1:\(caches[0].port)"), status.stdout)
        for client in clients { try driver.unmount(client.mountpoint, cache: client.cache) }
    }
}
