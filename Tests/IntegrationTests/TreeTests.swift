import Foundation
import Glibc
@testable import RangeFSFileSystem
import RangeFSTestSupport
import XCTest

/// Issue 16: a web directory mounts as a tree, listed lazily, with exact sizes and dates, and costs one request
/// per directory where the listing states them (nginx JSON) and at most one probe per file where it does not.
final class TreeTests: MountTestCase {
    /// Awkward names at the top of the tree.
    static let oddNames = ["with space.bin", "100%.bin", "hash#tag.bin", "what?.bin", "co:lon.bin", "[bracket].bin",
                           "_under.bin", "été.mp4", String(repeating: "é", count: 127) + "x"]

    /// Writes a tree of 3 levels under the origin's `listed/` folder (which nginx lists as HTML at `/listed/` and
    /// as JSON at `/listed-json/`): `files` files in all, returned as relative path -> size.
    func makeTree(files: Int) throws -> [String: Int] {
        let root = origin.root + "/listed"
        try? FileManager.default.removeItem(atPath: root)
        var tree: [String: Int] = [:]
        var paths = Self.oddNames
        var index = 0
        while paths.count < files {
            let top = index % 3, middle = index / 3 % 3
            paths.append(index % 4 == 0 ? "d\(top)/f\(index).bin" : "d\(top)/e\(middle)/f\(index).bin")
            index += 1
        }
        for (number, path) in paths.enumerated() {
            let full = root + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            let size = 100 + number * 37 % 5000
            try Data(repeating: UInt8(number % 251), count: size).write(to: URL(fileURLWithPath: full))
            tree[path] = size
        }
        return tree
    }

    /// Relative path -> (size, modification time) of every file under `folder`.
    func files(under folder: String) throws -> [String: (Int, Int)] {
        var result: [String: (Int, Int)] = [:]
        let found = try Shell.run("/usr/bin/find", [folder, "-type", "f", "-printf", "%P\\t%s\\t%T@\\n"])
        XCTAssertEqual(found.status, 0, found.stderr)
        for line in found.stdout.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 3, let size = Int(fields[1]), let time = Double(fields[2]) else { continue }
            result[String(fields[0])] = (size, Int(time))
        }
        return result
    }

    /// `find` in the mount lists exactly the files of `tree`, with the origin's sizes and modification times (to the
    /// minute where the listing states no more: nginx's HTML).
    func assertMountShowsTheOrigin(_ tree: [String: Int], datesToTheMinute: Bool = false, line: UInt = #line) throws {
        let mounted = try files(under: mountpoint)
        XCTAssertEqual(Set(mounted.keys), Set(tree.keys), line: line)
        for (path, (size, time)) in try files(under: origin.root + "/listed") {
            XCTAssertEqual(mounted[path]?.0, size, path, line: line)
            XCTAssertEqual(mounted[path]?.1, datesToTheMinute ? time / 60 * 60 : time, path, line: line)
        }
    }

    func requests(under prefix: String) -> [AccessLogLine] {
        origin.accessLog().filter { $0.path.hasPrefix(prefix) }
    }

    // 1. nginx JSON: `find` lists exactly the origin's files with exact sizes and dates; `ls -lR` costs one request
    //    per directory and no probe, and a second one costs nothing.
    func testAJSONListedTreeOfAThousandFilesCostsOneRequestPerDirectory() throws {
        let tree = try makeTree(files: 1000)
        origin.clearAccessLog()
        try mount([origin.url("listed-json/")], extra: Self.steadyListings)  // lists the root
        try assertMountShowsTheOrigin(tree)
        let listings = requests(under: "/listed-json/")
        XCTAssertEqual(listings.count, 13, "one request per directory: the root, d0-d2 and their e0-e2")
        XCTAssertTrue(listings.allSatisfy { $0.range != "bytes=0-0" }, "no probes")
        origin.clearAccessLog()
        XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
        XCTAssertEqual(requests(under: "/listed-json/").count, 0, "a second ls -lR costs nothing")
        // The odd names read right.
        for name in Self.oddNames {
            let bytes = try XCTUnwrap(FileManager.default.contents(atPath: mountpoint + "/" + name))
            XCTAssertEqual(bytes, try Data(contentsOf: URL(fileURLWithPath: origin.root + "/listed/" + name)), name)
        }
    }

    // 2. nginx HTML: sizes are exact and dates to the minute, which is enough for `ls -l` (issue 24): one request
    //    per directory and no probe, dates to the minute, and a second `ls -lR` costs nothing. A listed file reads
    //    right.
    func testAnHTMLListedTreeCostsOneRequestPerDirectory() throws {
        let tree = try makeTree(files: 1000)
        origin.clearAccessLog()
        try mount([origin.url("listed/")], extra: Self.steadyListings)  // lists the root
        try assertMountShowsTheOrigin(tree, datesToTheMinute: true)
        let log = requests(under: "/listed/")
        XCTAssertEqual(log.filter { $0.path.hasSuffix("/") }.count, 13)
        XCTAssertEqual(log.filter { $0.range == "bytes=0-0" }.count, 0, "no probes")
        origin.clearAccessLog()
        XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
        XCTAssertEqual(requests(under: "/listed/").count, 0, "a second ls -lR costs nothing")
        let sample = "d1/e0/f1.bin"
        XCTAssertNotNil(tree[sample])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + sample), try Shell.sha256(of: origin.root + "/listed/" + sample))
    }

    // 3. python http.server: no sizes or dates at all, so each file is probed once on `ls -l`; exact sizes and dates
    //    from the probes, one request per directory, none on a second `ls -lR`; names come through and read right.
    func testAPythonHTTPServerTreeReadsRight() throws {
        let tree = try makeTree(files: 1000)
        let log = scratch.path + "/python.log"
        // Another port if the first is taken (a server that cannot bind exits, and the tree would show empty).
        let (server, port) = try BackgroundProcess.listening { port in
            try BackgroundProcess("/usr/bin/python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1",
                                                       "--directory", origin.root + "/listed"], logPath: log)
        }
        defer { server.stop() }
        /// The paths of the GETs python has logged so far (`"GET /d0/f1.bin HTTP/1.1" 200 -`).
        func requests() -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
                guard let start = line.range(of: "\"GET ") else { return nil }
                return line[start.upperBound...].split(separator: " ").first.map(String.init)
            }
        }
        var up = false
        for _ in 0..<100 where !up {
            up = (try? Shell.run("/usr/bin/curl", ["-sf", "-o", "/dev/null", "http://127.0.0.1:\(port)/"]).status) == 0
            if !up { usleep(50_000) }
        }
        let before = requests().count
        try mount(["http://127.0.0.1:\(port)/"], extra: Self.steadyListings)  // lists the root
        try assertMountShowsTheOrigin(tree)
        let listing = Array(requests().dropFirst(before))
        XCTAssertEqual(listing.filter { $0.hasSuffix("/") }.count, 13, "one request per directory")
        let probes = listing.filter { !$0.hasSuffix("/") }
        XCTAssertEqual(Set(probes).count, probes.count, "no file probed twice")
        let afterFirst = requests().count
        XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
        usleep(200_000)
        XCTAssertEqual(requests().count, afterFirst, "a second ls -lR costs nothing")
        for name in Self.oddNames {
            XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + name), try Shell.sha256(of: origin.root + "/listed/" + name))
        }
    }

    // 1b. Apache 2 and lighttpd: HTML listings with rounded sizes, so each file is probed once on `ls -l`; their
    //     access logs show one request per directory and no file probed twice, and a second `ls -lR` costs nothing.
    func testApacheAndLighttpdTreesMountWithExactSizesAndDates() throws {
        let tree = try makeTree(files: 1000)
        // Apache's workers run as www-data: the tree must be readable by others.
        for path in [(origin.root as NSString).deletingLastPathComponent, origin.root] { chmod(path, 0o755) }
        // Apache will not honour If-Range for a file modified less than a second ago (its validators are not
        // strong yet), and answers the whole file; let the new tree age first.
        sleep(2)
        for kind in [ListingServer.Kind.apache, .lighttpd] {
            let server = try ListingServer(kind, root: origin.root)
            defer { server.stop() }
            let ownCache = scratch.path + "/cache-" + kind.rawValue  // each its own saved set
            server.clearAccessLog()
            let mounted = try driver.mount(mountpoint, urls: [server.url("listed/")], cache: ownCache,
                                           extra: Self.steadyListings)  // lists the root
            XCTAssertEqual(mounted.status, 0, mounted.stderr)
            try assertMountShowsTheOrigin(tree)
            let log = server.accessLog().filter { $0.path.hasPrefix("/listed/") }
            let listings = log.filter { $0.path.hasSuffix("/") }
            XCTAssertEqual(listings.filter { $0.status == 200 }.count, 13, "\(kind): one listing per directory")
            // lighttpd refuses a second listing in progress (503): the walk ahead (issue 36) stops at the first
            // refusals, at most one wave of them, and the readers list again.
            XCTAssertLessThanOrEqual(listings.count - 13, kind == .apache ? 0 : 12, "\(kind): \(listings)")
            let probes = log.filter { $0.range == "bytes=0-0" }
            XCTAssertEqual(Set(probes.map(\.path)).count, probes.count, "\(kind): no file probed twice")
            XCTAssertLessThanOrEqual(probes.count, tree.count)
            server.clearAccessLog()
            XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
            XCTAssertEqual(server.accessLog().count, 0, "\(kind): a second ls -lR costs nothing")
            for name in Self.oddNames {
                XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + name),
                               try Shell.sha256(of: origin.root + "/listed/" + name), "\(kind): \(name)")
            }
            try driver.unmount(mountpoint, cache: ownCache)
        }
    }

    // 3b. A hostile page: links out of the tree, to other hosts, with '/' in a name, a 4 KB name, 100,000 links.
    //     Only the links inside the tree show, all 100,000 of them (no cap below a million), and reading the names
    //     sends no request (issue 35). The f*.bin links are dead: a lookup probes one with a batch of never-probed
    //     siblings, each link once, and the dead ones leave the directory.
    func testAHostileListingStaysInsideTheTreeAndTheRestWorks() throws {
        let folder = origin.root + "/hostile"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: origin.root + "/outside.txt"))
        let good = try origin.serveRandomFile("hostile/good.bin", size: 300_000)
        var page = """
        <a href="../outside.txt">up</a> <a href="..%2Foutside.txt">encoded</a> <a href="/outside.txt">rooted</a>
        <a href="http://127.0.0.2:\(origin.port)/hostile/elsewhere.bin">other host</a> <a href="../">parent</a>
        <a href="\(String(repeating: "n", count: 4096)).bin">long</a> <a href="good.bin">good</a>

        """
        for index in 0..<100_000 { page += "<a href=\"f\(index).bin\">f\(index)</a>\n" }
        try page.write(toFile: folder + "/index.html", atomically: false, encoding: .utf8)
        try mount([origin.url("hostile/")], extra: Self.steadyListings)  // counted: no re-listing midway
        origin.clearAccessLog()
        /// Requests for the page's links (not for the page itself).
        func linkRequests() -> [String] {
            origin.accessLog().map(\.path).filter { $0.hasPrefix("/hostile/") && $0 != "/hostile/index.html" }
        }
        let links = Set((0..<100_000).map { "f\($0).bin" })
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: mountpoint)), links.union(["good.bin"]))
        XCTAssertEqual(linkRequests(), [], "reading the names sends no request")
        XCTAssertThrowsError(try statFile(mountpoint + "/f5.bin"), "a dead link")
        // The lookup is answered once its own probe is; the siblings' answers are logged as they come.
        let batch = DirectoryService.probeBatch
        let deadline = Date().addingTimeInterval(30)
        while linkRequests().count < batch && Date() < deadline { usleep(20_000) }
        let probed = linkRequests()
        XCTAssertEqual(probed.count, batch, "the link and a batch of never-probed siblings")
        XCTAssertEqual(Set(probed).count, probed.count, "no link probed twice")
        for path in probed {
            XCTAssertThrowsError(try statFile(mountpoint + "/" + path.dropFirst("/hostile/".count)), path)
        }
        XCTAssertEqual(linkRequests(), probed, "a dead link is not probed again")
        let found = probed.map { String($0.dropFirst("/hostile/".count)) }
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: mountpoint)),
                       links.union(["good.bin"]).subtracting(found), "the dead links found left the directory")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/good.bin"), good)
    }

    // 3c. Limits: a listing that redirects to itself is named at mount and left out, a tree that goes on forever
    //     (a link to itself) stops at the depth limit, and the rest of the mount works; status shows what is not
    //     listed yet.
    func testListingsThatLoopStopAtTheirLimits() throws {
        let spiral = origin.root + "/spiral"
        try? FileManager.default.removeItem(atPath: spiral)
        try FileManager.default.createDirectory(atPath: spiral, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: spiral + "/in", withDestinationPath: ".")
        let digest = try origin.serveRandomFile("beside.bin", size: 10_000)
        let mounted = try mount([origin.url("loop/"), origin.url("spiral/"), origin.url("beside.bin")], expectStatus: 2)
        XCTAssertTrue(mounted.stderr.contains(origin.url("loop/")), "the listing that fails is named: \(mounted.stderr)")
        func notListed() throws -> [String] {
            let status = try driver.run(["status", mountpoint, "--json"])
            let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            let files = try XCTUnwrap(json["files"] as? [[String: Any]])
            return files.filter { $0["state"] as? String == "not listed" }.compactMap { $0["name"] as? String }
        }
        // Directory URLs are listed at mount; their subdirectories when first visited.
        XCTAssertEqual(try notListed(), ["spiral/in/"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: mountpoint + "/loop"), "a directory that cannot be listed is not mounted")
        let found = try Shell.run("/usr/bin/find", [mountpoint + "/spiral", "-type", "d"], timeout: 120)
        let levels = found.stdout.split(separator: "\n").count
        XCTAssertGreaterThan(levels, 10)
        XCTAssertLessThanOrEqual(levels, RangeFS.maximumDepth + 1, "the depth limit")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/beside.bin"), digest)
        // Every level of the spiral was listed.
        XCTAssertEqual(try notListed(), [])
    }

    // 4. With the origin stopped after one `ls -lR` and one read, a remount with the same cache shows the same tree,
    //    and the read data is served.
    func testATreeStaysBrowsableAndReadWhileTheOriginIsDown() throws {
        let tree = try makeTree(files: 60)
        try mount([origin.url("listed-json/")])
        XCTAssertEqual(try Shell.run("/bin/ls", ["-lR", mountpoint]).status, 0)
        let read = "d2/e1/f5.bin"
        XCTAssertNotNil(tree[read])
        let digest = try Shell.sha256(of: origin.root + "/listed/" + read)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + read), digest)
        let before = try files(under: mountpoint)
        try driver.unmount(mountpoint, cache: cache)

        origin.halt()
        defer { try? origin.resume() }
        try mount([])
        let after = try files(under: mountpoint)
        XCTAssertEqual(Set(after.keys), Set(before.keys))
        for (path, attributes) in before {
            XCTAssertEqual(after[path]?.0, attributes.0, path)
            XCTAssertEqual(after[path]?.1, attributes.1, path)
        }
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/" + read), digest, "the read file is served from the cache")
    }

    // 5. A file added on the origin appears after the refresh interval without a remount, a removed one goes, and a
    //    handle open on the removed file keeps reading the version it opened.
    func testNewFilesAppearAndRemovedOnesGoAfterTheRefreshInterval() throws {
        _ = try makeTree(files: 20)
        let folder = origin.root + "/listed"
        let leaving = try origin.serveRandomFile("listed/leaving.bin", size: 200_000)
        try mount([origin.url("listed-json/")], extra: ["--dir-cache-time", "1"])
        var names = try FileManager.default.contentsOfDirectory(atPath: mountpoint)
        XCTAssertTrue(names.contains("leaving.bin"))
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: mountpoint + "/leaving.bin"))
        defer { try? handle.close() }
        let firstHalf = try XCTUnwrap(try handle.read(upToCount: 100_000))

        let arriving = try origin.serveRandomFile("listed/arriving.bin", size: 50_000)
        try FileManager.default.removeItem(atPath: folder + "/leaving.bin")
        let deadline = Date().addingTimeInterval(15)
        repeat {
            usleep(300_000)
            names = try FileManager.default.contentsOfDirectory(atPath: mountpoint)
        } while (names.contains("leaving.bin") || !names.contains("arriving.bin")) && Date() < deadline
        XCTAssertTrue(names.contains("arriving.bin"), "\(names)")
        XCTAssertFalse(names.contains("leaving.bin"), "\(names)")
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/arriving.bin"), arriving)
        // The open handle still reads the version it opened (its blocks are cached: the origin no longer has it).
        let secondHalf = try XCTUnwrap(try handle.read(upToCount: 100_000))
        let copy = scratch.path + "/leaving.copy"
        try (firstHalf + secondHalf).write(to: URL(fileURLWithPath: copy))
        XCTAssertEqual(try Shell.sha256(of: copy), leaving)
    }

    // A list file may place files in folders; they survive a remount, and `rm folder/name` removes one.
    func testAListFilePlacesFilesInFolders() throws {
        let first = try origin.serveRandomFile("one.bin", size: 70_000)
        let second = try origin.serveRandomFile("two.bin", size: 80_000)
        let list = scratch.path + "/files.list"
        try """
        movies/2026/first.bin=\(origin.url("one.bin"))
        movies/second.bin=\(origin.url("two.bin"))
        top.bin=\(origin.url("one.bin?top"))
        """.write(toFile: list, atomically: false, encoding: .utf8)
        try mount([], extra: ["--list", list])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["movies", "top.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/movies/2026/first.bin"), first)
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/movies/second.bin"), second)
        XCTAssertEqual(try driver.run(["rm", "movies/2026/first.bin", "--mount", mountpoint]).status, 0)
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        XCTAssertEqual(Set(try files(under: mountpoint).keys), ["movies/second.bin", "top.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/movies/second.bin"), second)
    }

    // A directory URL written without its `/` is a directory when the server redirects it to the URL with one.
    func testADirectoryURLWithoutItsSlashIsADirectory() throws {
        let tree = try makeTree(files: 15)
        try mount([origin.url("listed")])
        XCTAssertEqual(Set(try files(under: mountpoint).keys), Set(tree.keys))
    }

    // 7. `rangefs add URL/` mounts a directory while mounted, and it is there after a remount.
    func testAddingADirectoryWhileMountedSurvivesARemount() throws {
        let tree = try makeTree(files: 30)
        let single = try origin.serveRandomFile("single.bin", size: 4096)
        try mount([origin.url("single.bin")])
        let added = try driver.run(["add", origin.url("listed-json/"), "--name", "library", "--mount", mountpoint])
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(Set(try files(under: mountpoint + "/library").keys), Set(tree.keys))
        try driver.unmount(mountpoint, cache: cache)
        try mount([])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted(), ["library", "single.bin"])
        XCTAssertEqual(Set(try files(under: mountpoint + "/library").keys), Set(tree.keys))
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/single.bin"), single)
    }
}
