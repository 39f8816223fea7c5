import CCurl
import Foundation
@testable import RangeFSFetch
@testable import RangeFSHTTP
import XCTest

/// Credentials split off URLs and kept per origin, redirect targets and their expiry, and which proxy a URL takes.
final class HTTPSessionTests: XCTestCase {
    func testUserinfoLeavesTheURLAndIsKeptForItsOrigin() {
        let split = URLOrigin.removingUserinfo("https://al%40ice:p%3Ass:w@Example.COM/a/b.bin?x=1")
        XCTAssertEqual(split.url, "https://Example.COM/a/b.bin?x=1")
        XCTAssertEqual(split.user, "al@ice")
        XCTAssertEqual(split.password, "p:ss:w")
        XCTAssertEqual(URLOrigin.of("https://u:p@Example.COM/a"), "https://example.com:443")
        XCTAssertEqual(URLOrigin.of("http://h:8080"), "http://h:8080")
        XCTAssertEqual(URLOrigin.of("http://[::1]:81/x"), "http://[::1]:81")
        XCTAssertEqual(URLOrigin.of("http://[::1]/x"), "http://[::1]:80")
        XCTAssertNil(URLOrigin.of("ftp://h/x"))
        XCTAssertEqual(URLOrigin.removingUserinfo("http://h/x@y").url, "http://h/x@y", "an @ in the path is no userinfo")

        let table = CredentialTable()
        let adopted = table.adopt("http://bob:pw@h:81/f")
        XCTAssertEqual(adopted.url, "http://h:81/f")
        XCTAssertTrue(adopted.changed)
        XCTAssertFalse(table.adopt("http://bob:pw@h:81/g").changed, "the same login again changes nothing")
        table.setHeaders(["Authorization: Bearer t"], for: "http://h:81/")
        XCTAssertEqual(table.credentials(for: "http://h:81/other"),
                       OriginCredentials(user: "bob", password: "pw", headers: ["Authorization: Bearer t"]))
        XCTAssertNil(table.credentials(for: "http://h:82/f"), "another port is another origin")
        XCTAssertNil(table.credentials(for: "https://h:81/f"), "another scheme is another origin")
    }

    func testSignedTargetsExpireAsTheirQuerySays() throws {
        let amz = RedirectMemory.expiry(of: "https://b.s3/k?X-Amz-Date=20261124T010000Z&X-Amz-Expires=900&X-Amz-Signature=s")
        XCTAssertEqual(amz?.timeIntervalSince1970, 1_795_482_000 + 900)
        let goog = RedirectMemory.expiry(of: "https://g/k?x-goog-date=20261124T010000Z&x-goog-expires=60")
        XCTAssertEqual(goog?.timeIntervalSince1970, 1_795_482_000 + 60)
        XCTAssertEqual(RedirectMemory.expiry(of: "https://cdn/k?Expires=1795482000&Signature=x")?.timeIntervalSince1970,
                       1_795_482_000)
        XCTAssertNil(RedirectMemory.expiry(of: "https://cdn/k?e=1795482000"))
        XCTAssertNil(RedirectMemory.expiry(of: "https://cdn/k"))

        let memory = RedirectMemory()
        let now = Date()
        let soon = Int(now.timeIntervalSince1970) + 60
        memory.remember("http://cdn/f?Expires=\(soon)", for: "http://h/f")
        XCTAssertEqual(memory.target(for: "http://h/f", now: now), "http://cdn/f?Expires=\(soon)")
        XCTAssertNil(memory.target(for: "http://h/f", now: now.addingTimeInterval(56)),
                     "not used in the last seconds of its life")
        XCTAssertNil(memory.target(for: "http://h/f", now: now), "and forgotten once expired")
        memory.remember("http://cdn/g", for: "http://h/g")
        memory.forget("http://h/g")
        XCTAssertNil(memory.target(for: "http://h/g"))
    }

    func testTheProxyOfAURLComesFromTheOptionOrTheEnvironmentUnlessExcepted() {
        var options = HTTPOptions()
        let environment = ["http_proxy": "http://u:p@envproxy:3128", "https_proxy": "http://tls-proxy:3128",
                           "no_proxy": "internal.example,.corp"]
        let fromEnvironment = HTTPSession(options: options, environment: environment)
        XCTAssertEqual(fromEnvironment.proxy(for: "http://h/f"), "http://***@envproxy:3128", "shown without its login")
        XCTAssertEqual(fromEnvironment.proxy(for: "https://h/f"), "http://tls-proxy:3128")
        XCTAssertNil(fromEnvironment.proxy(for: "http://internal.example/f"))
        XCTAssertNil(fromEnvironment.proxy(for: "http://a.b.corp/f"))
        XCTAssertEqual(fromEnvironment.proxy(for: "http://notcorp/f"), "http://***@envproxy:3128")
        XCTAssertNil(HTTPSession(options: options, environment: [:]).proxy(for: "http://h/f"))
        XCTAssertNil(HTTPSession(options: options, environment: ["HTTP_PROXY": "http://x:1"]).proxy(for: "http://h/f"),
                     "like libcurl, no uppercase HTTP_PROXY")

        options.proxy = "http://given:8080"
        options.noProxy = "*"
        XCTAssertNil(HTTPSession(options: options, environment: environment).proxy(for: "http://h/f"))
        options.noProxy = "other"
        XCTAssertEqual(HTTPSession(options: options, environment: environment).proxy(for: "http://h/f"),
                       "http://given:8080")
    }

    func testRedirectLocationsResolveAgainstTheURLThatSentThem() {
        XCTAssertEqual(Transfer.resolve("/b/c.bin", against: "http://h:81/a/x"), "http://h:81/b/c.bin")
        XCTAssertEqual(Transfer.resolve("c.bin?s=1", against: "http://h/a/x"), "http://h/a/c.bin?s=1")
        XCTAssertEqual(Transfer.resolve("https://cdn/k", against: "http://h/a"), "https://cdn/k")
    }

    func testCertificateAndProxyFailuresNameTheirFix() {
        XCTAssertTrue(Transfer.fetchError(CURLE_PEER_FAILED_VERIFICATION, osErrno: 0,
                                          message: "SSL certificate problem: self-signed certificate")
            .userMessage.contains("--cacert"))
        let proxy = Transfer.fetchError(CURLE_COULDNT_CONNECT, osErrno: ECONNREFUSED, message: "Failed to connect",
                                        proxy: "http://127.0.0.1:3128")
        XCTAssertEqual(proxy, .proxy("http://127.0.0.1:3128", "connection refused"))
        XCTAssertTrue(proxy.userMessage.contains("proxy http://127.0.0.1:3128"))
        XCTAssertEqual(Transfer.fetchError(CURLE_COULDNT_CONNECT, osErrno: ECONNREFUSED, message: ""), .connectionRefused)
    }
}

/// Issue 28's proxy groups: sharding within a group, failover along the chain, and the return to the first group.
final class ProxyChainTests: XCTestCase {
    final class Clock: @unchecked Sendable {
        var now = 100.0
    }

    func testGroupsAndDirectAreParsedAndNonsenseIsNamed() throws {
        let chain = try ProxyChain(parsing: "http://p1:3128|p2:3128;DIRECT")
        XCTAssertEqual(chain.groups.map { $0.map { $0.url } }, [["http://p1:3128", "p2:3128"], [nil]])
        XCTAssertThrowsError(try ProxyChain(parsing: "http://p1:3128;;DIRECT"))
        XCTAssertThrowsError(try ProxyChain(parsing: "http://:3128"))
    }

    func testRequestsAreShardedByURLAndBlockOverTheFirstGroup() throws {
        let chain = try ProxyChain(parsing: "http://a:1|http://b:1;http://c:1")
        var counts: [String: Int] = [:]
        for block in 0..<200 { counts[chain.choose(key: "http://o/f#\(block)").url!, default: 0] += 1 }
        XCTAssertNil(counts["http://c:1"], "the second group is not used while the first works")
        XCTAssertGreaterThan(counts["http://a:1"] ?? 0, 60, "\(counts)")
        XCTAssertGreaterThan(counts["http://b:1"] ?? 0, 60, "\(counts)")
        // Consistent: the same block always goes to the same proxy.
        XCTAssertEqual(chain.choose(key: "http://o/f#7"), chain.choose(key: "http://o/f#7"))
    }

    func testAFailedProxyMovesOnlyItsShareThenTheNextGroupThenBackAfterTheReset() throws {
        let clock = Clock()
        let chain = try ProxyChain(parsing: "http://a:1|http://b:1;http://c:1", resetAfter: 300, clock: { clock.now })
        let keys = (0..<100).map { "http://o/f#\($0)" }
        let before = keys.map { chain.choose(key: $0) }
        let a = ProxyChain.Proxy(url: "http://a:1")
        chain.fail(a, reason: "connection refused")
        let after = keys.map { chain.choose(key: $0) }
        for (old, new) in zip(before, after) where old != a { XCTAssertEqual(old, new, "a shard of b moved") }
        XCTAssertFalse(after.contains(a))
        chain.fail(ProxyChain.Proxy(url: "http://b:1"), reason: "timed out")
        XCTAssertEqual(Set(keys.map { chain.choose(key: $0).url }), ["http://c:1"])
        XCTAssertTrue(chain.report.contains("in use: group 2"), chain.report)
        XCTAssertTrue(chain.report.contains("http://a:1 (failed: connection refused)"), chain.report)
        clock.now += 299
        XCTAssertEqual(chain.choose(key: keys[0]).url, "http://c:1")
        clock.now += 2
        XCTAssertEqual(keys.map { chain.choose(key: $0) }, before, "after the reset the first group serves again")
    }

    func testWhenTheWholeChainFailedItStartsOverFromTheFirstGroup() throws {
        let chain = try ProxyChain(parsing: "http://a:1;http://c:1")
        chain.fail(ProxyChain.Proxy(url: "http://a:1"), reason: "x")
        chain.fail(ProxyChain.Proxy(url: "http://c:1"), reason: "x")
        XCTAssertEqual(chain.choose(key: "k").url, "http://a:1")
        XCTAssertEqual(chain.count, 2)
    }
}
