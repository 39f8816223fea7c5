import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 45, case 9: secrets nowhere but where the user put them. The passwords of every proxy of a `--proxy`
/// group are hidden from the daemon's argv, and a kept HTML listing keeps no value of its links' queries (a
/// presigned link's `X-Amz-Signature`). The object store's key: ObjectStoreMountTests.
final class SecretsAtRestTests: MountTestCase {
    func secret(_ label: String) -> String { label + "-SECRET-" + String(UInt64.random(in: 1...UInt64.max), radix: 16) }

    func testEveryProxyOfEveryGroupIsMaskedInTheDaemonsArgv() throws {
        let expected = try origin.serveRandomFile("proxied45.bin", size: 64 << 10)
        let first = secret("p1"), second = secret("p2"), third = secret("p3")
        // Never used: --noproxy sends the origin's requests direct. The chain is parsed and shown all the same.
        let chain = "http://u1:\(first)@proxy-one.invalid:3128|http://u2:\(second)@proxy-two.invalid:3128;"
            + "u3:\(third)@proxy-three.invalid:3128"
        try mount([origin.url("proxied45.bin")], extra: ["--proxy", chain, "--noproxy", "127.0.0.1"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/proxied45.bin"), expected)
        let pid = try XCTUnwrap(driver.daemonPID(cache: cache))
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"))
        let shown = String(decoding: bytes.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        for hidden in [first, second, third] { XCTAssertFalse(shown.contains(hidden), "the daemon's argv: \(shown)") }
        XCTAssertTrue(shown.contains("http://***@proxy-one.invalid:3128|http://***@proxy-two.invalid:3128;"
                                     + "***@proxy-three.invalid:3128"), shown)
        let status = try driver.run(["status", "--mount", mountpoint])
        for hidden in [first, second, third] { XCTAssertFalse(status.stdout.contains(hidden), status.stdout) }
    }

    func testAKeptHTMLListingKeepsNoSignatureOfItsLinks() throws {
        let signature = secret("sig"), credential = secret("cred")
        try FileManager.default.createDirectory(atPath: origin.path("signed45"), withIntermediateDirectories: true)
        let expected = try origin.serveRandomFile("signed45/a.bin", size: 32 << 10)
        let page = """
        <html><body><a href="a.bin">a.bin</a>
        <a href="a.bin?X-Amz-Credential=\(credential)&amp;X-Amz-Signature=\(signature)">a.bin?X-Amz-Signature=\(signature)</a>
        <a href='https://store.example/b.bin?X-Amz-Signature=\(signature)'>elsewhere</a>
        </body></html>

        """
        try page.write(toFile: origin.path("signed45/index.html"), atomically: true, encoding: .utf8)
        try mount([origin.url("signed45/")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountpoint), ["a.bin"])
        XCTAssertEqual(try Shell.sha256(of: mountpoint + "/a.bin"), expected)
        try driver.unmount(mountpoint, cache: cache)
        let kept = try FileManager.default.contentsOfDirectory(atPath: cache + "/listings")
        XCTAssertEqual(kept.count, 1, "the listing is kept")
        for hidden in [signature, credential] {
            let holders = try Shell.run("/bin/grep", ["-rlF", hidden, cache]).stdout
            XCTAssertEqual(holders, "", "no file under the cache holds a link's query value")
        }
        let text = try String(contentsOfFile: cache + "/listings/" + kept[0], encoding: .utf8)
        XCTAssertTrue(text.contains("a.bin?X-Amz-Credential=***&amp;X-Amz-Signature=***"), text)
    }
}
