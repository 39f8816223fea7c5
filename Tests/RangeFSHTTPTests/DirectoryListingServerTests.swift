import Foundation
import Glibc
@testable import RangeFSCatalog
import RangeFSTestSupport
import XCTest

/// Issue 16's listings read from live servers started here on 127.0.0.1: nginx's HTML and JSON autoindex and
/// python's http.server, over a folder of awkward names. (Apache and lighttpd come with the tree mount.)
final class DirectoryListingServerTests: XCTestCase {
    static let names = ["plain.bin", "with space.bin", "100%.bin", "hash#tag.bin", "what?.bin", "co:lon.bin",
                        "[bracket].bin", "_under.bin", "été.mp4", String(repeating: "é", count: 127) + "x"]
    var origin: NginxOrigin!

    override func setUpWithError() throws {
        origin = try NginxOrigin()
        let folder = origin.root + "/listed"
        try FileManager.default.createDirectory(atPath: folder + "/sub", withIntermediateDirectories: true)
        for (index, name) in Self.names.enumerated() {
            try Data(repeating: UInt8(index), count: 1000 + index).write(to: URL(fileURLWithPath: folder + "/" + name))
        }
    }

    override func tearDown() {
        origin?.stop()
        origin = nil
        super.tearDown()
    }

    func fetch(_ url: String) throws -> [UInt8] {
        let result = try Shell.run("/usr/bin/curl", ["-sf", url])
        XCTAssertEqual(result.status, 0, result.stderr)
        return Array(result.stdout.utf8)
    }

    /// How precisely a listing states dates: not at all, to the minute (nginx's HTML), or to the second.
    enum Dates { case none, minute, exact }

    func check(_ listing: ParsedListing, base: String, exactSizes: Bool, dates: Dates) throws {
        XCTAssertEqual(Set(listing.entries.map(\.name)), Set(Self.names + ["sub"]))
        XCTAssertTrue(listing.skipped.isEmpty, "\(listing.skipped)")
        for entry in listing.entries where !entry.isDirectory {
            let path = origin.root + "/listed/" + entry.name
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            XCTAssertEqual(entry.size, exactSizes ? (attributes[.size] as? NSNumber)?.uint64Value : nil, entry.name)
            let modified = Int64((attributes[.modificationDate] as! Date).timeIntervalSince1970)
            switch dates {
            case .none: XCTAssertNil(entry.modificationTime, entry.name)
            case .minute: XCTAssertEqual(entry.modificationTime, modified / 60 * 60, entry.name)
            case .exact: XCTAssertEqual(entry.modificationTime, modified, entry.name)
            }
            // The URL reaches the file.
            XCTAssertEqual(try fetch(entry.url).count, Int(truncating: attributes[.size] as! NSNumber), entry.url)
        }
        XCTAssertEqual(listing.entries.first { $0.name == "sub" }?.url, base + "sub/")
    }

    func testNginxHTMLAndJSONListings() throws {
        let html = origin.url("listed/")
        try check(DirectoryListing.parse(try fetch(html), base: html), base: html, exactSizes: true, dates: .minute)
        let json = origin.url("listed-json/")
        try check(DirectoryListing.parse(try fetch(json), base: json), base: json, exactSizes: true, dates: .exact)
    }

    func testPythonHTTPServerListing() throws {
        // Another port if the first is taken: a server that cannot bind exits, and the listing would be empty.
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1",
                                                       "--directory", origin.root])
        }
        defer { server.stop() }
        let base = "http://127.0.0.1:\(port)/listed/"
        var body: [UInt8] = []
        for _ in 0..<100 where body.isEmpty {
            body = Array((try? Shell.run("/usr/bin/curl", ["-sf", base]).stdout.utf8) ?? "".utf8)
            if body.isEmpty { usleep(50_000) }
        }
        try check(DirectoryListing.parse(body, base: base), base: base, exactSizes: false, dates: .none)
    }
}
