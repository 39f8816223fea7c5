import ArgumentParser
import Glibc
@testable import RangeFSFileSystem
import RangeFSFUSE
import RangeFSHTTP
@testable import rangefs
import XCTest

/// argv and `-o` lists become one configuration; with no tuning flags it holds the defaults docs/usage.md states.
final class MountOptionsTests: XCTestCase {
    func configuration(_ arguments: [String]) throws -> MountConfiguration {
        let command = try RangefsCommand.parseCommandLine(arguments)
        if let mount = command as? MountCommand { return MountConfiguration(mount.options, environment: ["HOME": "/home/u"]) }
        let fstab = try XCTUnwrap(command as? FstabMountCommand, "\(type(of: command))")
        return MountConfiguration(fstab.options, environment: ["HOME": "/home/u"])
    }

    func parseError(_ arguments: [String]) -> String {
        do {
            _ = try RangefsCommand.parseCommandLine(arguments)
            return "parsed"
        } catch {
            return RangefsCommand.message(for: error)
        }
    }

    /// One assertion per row of the tuning table in docs/usage.md, with the value it states.
    func testNoTuningFlagsGiveTheDocumentedDefaults() throws {
        let config = try configuration(["mount", "/mnt/m", "http://h/f.bin"])
        XCTAssertEqual(config.store.commitInterval, .milliseconds(500))                 // --commit-interval 0.5
        XCTAssertEqual(config.store.commitBytes, 8 << 20)                                // --commit-bytes 8M
        XCTAssertEqual(config.fileSystem.readaheadMaximum, 32 << 20)                     // --readahead 32M
        XCTAssertEqual(config.http.connectTimeout, 10)                                   // --connect-timeout 10
        XCTAssertEqual(config.http.lowSpeedTime, 20)                                     // --timeout 20
        XCTAssertEqual(config.fetch.attempts, 4)                                         // --retries 4
        XCTAssertEqual(config.fileSystem.prefetch, .use)                                 // --prefetch use
        XCTAssertEqual(config.fileSystem.directoryCacheTime, .seconds(60))               // --dir-cache-time 60
        XCTAssertNil(config.fetch.fillBytesPerSecond)                                    // --bwlimit none
        XCTAssertEqual(config.fetch.maxTransfers, 16)                                    // --connections 16
        XCTAssertEqual(config.fetch.connectionsPerFile, 8)                               // --connections-per-file 8
        XCTAssertEqual(config.http.maxHostConnections, 16)                               // --connections-per-host 16
        XCTAssertEqual(config.mount.kernelReadaheadKiB, 1024)                            // --kernel-readahead 1024
        XCTAssertEqual(config.fileSystem.revalidateAfter, .seconds(60))                  // --revalidate 60
        XCTAssertNil(config.store.maxBytes)                                              // --cache-max-size none
        XCTAssertNil(config.fetch.maxDownloads)                                          // --max-downloads none
        XCTAssertEqual(config.http.proxyResetAfter, 300)                                 // --proxy-reset-after 300
        XCTAssertFalse(config.mirrorsFromLinks)                                          // --mirrors-from-links off
        XCTAssertNil(config.metrics)                                                     // --metrics none
        XCTAssertTrue(config.fileSystem.directoryPrefetch)                               // --dir-prefetch on
        // And the rest of the usage line: 64K blocks, the default cache, background, owned by who mounts.
        XCTAssertEqual(config.fileSystem.blockSize, 64 << 10)
        XCTAssertEqual(config.cacheRoot, "/home/u/.cache/rangefs")
        XCTAssertFalse(config.foreground)
        XCTAssertEqual(config.mount.owner, Owner(uid: getuid(), gid: getgid()))
        XCTAssertEqual(config.mount.umask, 0)
    }

    func testLongOptionsReachTheirLayer() throws {
        let config = try configuration([
            "mount", "/mnt/m", "http://h/f.bin", "--commit-interval", "0.1", "--commit-bytes", "32M",
            "--readahead", "8M", "--prefetch", "none", "--bwlimit", "10M", "--cache-max-size", "2G", "--dir-prefetch", "off",
            "--connections", "4", "--kernel-readahead", "0", "--revalidate", "0", "--block-size", "1M", "-f",
        ])
        XCTAssertEqual(config.store.commitInterval, .milliseconds(100))
        XCTAssertEqual(config.store.commitBytes, 32 << 20)
        XCTAssertEqual(config.fileSystem.readaheadMaximum, 8 << 20)
        XCTAssertEqual(config.fileSystem.prefetch, PrefetchPolicy.none)
        XCTAssertFalse(config.fileSystem.directoryPrefetch)
        XCTAssertEqual(config.fetch.fillBytesPerSecond, 10 << 20)
        XCTAssertEqual(config.store.maxBytes, 2 << 30)
        XCTAssertEqual(config.fetch.maxTransfers, 4)
        XCTAssertNil(config.mount.kernelReadaheadKiB, "0 keeps the kernel's default")
        XCTAssertEqual(config.fileSystem.revalidateAfter, .zero, "0 checks at every open")
        XCTAssertEqual(config.fileSystem.blockSize, 1 << 20)
        XCTAssertTrue(config.foreground)
    }

    func testMountOptionsAreTheLongOptionsAndGenericOnesAreIgnored() throws {
        let config = try configuration([
            "/etc/rangefs/media.list", "/mnt/media", "-o",
            "cache=/var/cache/r,block_size=1M,commit-bytes=16M,allow_other,f,uid=1000,umask=027,_netdev,nofail,ro,"
                + "default_permissions,x-systemd.automount",
        ])
        XCTAssertEqual(config.cacheRoot, "/var/cache/r")
        XCTAssertEqual(config.fileSystem.blockSize, 1 << 20)
        XCTAssertEqual(config.store.commitBytes, 16 << 20)
        XCTAssertTrue(config.mount.allowOther)
        XCTAssertTrue(config.foreground, "f is -o foreground")
        XCTAssertEqual(config.mount.owner.uid, 1000)
        XCTAssertEqual(config.mount.umask, 0o027)
        XCTAssertEqual(try MountOptionList.expand(["a", "-ocache=/c,verbose", "b"]), ["a", "--cache=/c", "--verbose", "b"])
    }

    func testArchivesIsOffByDefaultAndOnWithTheFlagOrDashO() throws {
        XCTAssertFalse(try configuration(["http://h/a.zip", "/mnt"]).fileSystem.archives)
        XCTAssertTrue(try configuration(["http://h/a.zip", "/mnt", "--archives"]).fileSystem.archives)
        XCTAssertTrue(try configuration(["http://h/a.zip", "/mnt", "-o", "archives"]).fileSystem.archives)
    }

    func testBadOptionsAreNamedWithTheirFix() {
        XCTAssertTrue(parseError(["http://h/f", "/mnt", "-o", "cache=/c,bogus=1"])
            .contains("unknown mount option 'bogus=1'"))
        XCTAssertTrue(parseError(["http://h/f", "/mnt", "-o", "cache"]).contains("mount option 'cache' needs a value"))
        XCTAssertTrue(parseError(["http://h/f", "/mnt", "-o", "verbose=yes"]).contains("takes no value"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--block-size", "3K"]).contains("invalid --block-size '3K'"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--readahead", "lots"]).contains("--readahead"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--connections", "0"]).contains("--connections 0 is out of range"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--umask", "999"]).contains("invalid umask '999'"))
        let noColon = parseError(["mount", "/mnt", "--header", "Authorization Bearer tok-xyz"])
        XCTAssertTrue(noColon.contains("invalid --header 'Auth…': no ':'"), noColon)
        XCTAssertFalse(noColon.contains("tok-xyz"), "a header's value is never shown: it may be a token")
        let badName = parseError(["mount", "/mnt", "--header", "Bad Name: tok-xyz"])
        XCTAssertTrue(badName.contains("invalid --header 'Bad Name: …'"), badName)
        XCTAssertFalse(badName.contains("tok-xyz"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--cacert", "/nonexistent/ca.pem"])
            .contains("cannot read --cacert /nonexistent/ca.pem"))
        XCTAssertTrue(parseError(["mount", "/mnt", "--key", "/etc/hostname"]).contains("--key needs --cert"))
        let badProxy = parseError(["mount", "/mnt", "--proxy", "http://u:secret@p1:3128||http://p2:3128"])
        XCTAssertTrue(badProxy.contains("invalid --proxy"), badProxy)
        XCTAssertTrue(badProxy.contains("'' is no proxy"), badProxy)
        XCTAssertFalse(badProxy.contains("secret"), "a proxy's password is never shown")
        XCTAssertTrue(parseError(["mount", "/mnt", "--proxy-reset-after", "0"]).contains("--proxy-reset-after"))
    }

    func testProxyGroupsAndMirrorsFromLinksReachTheirLayer() throws {
        // The fstab shape: mount.rangefs LIST MOUNTPOINT -o OPTIONS.
        let configuration = try self.configuration([
            "/etc/rangefs/isos.list", "/mnt/isos", "-o",
            "proxy=http://p1:3128|http://p2:3128;DIRECT,proxy_reset_after=60,mirrors_from_links",
        ])
        XCTAssertEqual(configuration.http.proxy, "http://p1:3128|http://p2:3128;DIRECT")
        XCTAssertEqual(configuration.http.proxyResetAfter, 60)
        XCTAssertTrue(configuration.mirrorsFromLinks)
        XCTAssertEqual(try ProxyChain(parsing: configuration.http.proxy!).groups.map(\.count), [2, 1])
    }

    func testTheBackgroundChildsCommandLineHidesPasswordsAndTokens() {
        let masked = Daemon.maskingSecrets([
            "rangefs", "mount", "/mnt", "https://alice:pw@h/f", "--header", "Authorization: Bearer t",
            "--cookie=s=1", "--cookie", "a=b", "-o", "cache=/c,header=X: y", "-oheader=Z: 1", "--cache", "/c",
        ])
        XCTAssertEqual(masked, ["rangefs", "mount", "/mnt", "https://***@h/f", "--header", "***", "--cookie=***",
                                "--cookie", "***", "-o", "***", "-o***", "--cache", "/c"])
    }

    func testTheBackgroundChildsCommandLineHidesTheValuesOfAQuery() {
        let masked = Daemon.maskingSecrets([
            "rangefs", "mount", "/mnt", "http://h/f.bin?token=SECRET", "a.iso=https://b/k?X-Amz-Signature=SECRET&n=1",
            "--cache", "/c",
        ])
        XCTAssertEqual(masked, ["rangefs", "mount", "/mnt", "http://h/f.bin?token=***",
                                "a.iso=https://b/k?X-Amz-Signature=***&n=***", "--cache", "/c"])
    }

    /// Issue 45: every proxy of every group, in each way --proxy can be given.
    func testTheBackgroundChildsCommandLineHidesThePasswordsOfEveryProxy() {
        let chain = "http://u1:S1@p1:3128|http://u2:S2@p2:3128;u3:S3@p3:3128"
        let shown = "http://***@p1:3128|http://***@p2:3128;***@p3:3128"
        let masked = Daemon.maskingSecrets([
            "rangefs", "mount", "/mnt", "http://h/f", "--proxy", chain, "--proxy=" + chain, "-o",
            "cache=/c,proxy=" + chain + ",ro", "-oproxy=" + chain, "--noproxy=a,b",
        ])
        XCTAssertEqual(masked, ["rangefs", "mount", "/mnt", "http://h/f", "--proxy", shown, "--proxy=" + shown, "-o",
                                "cache=/c,proxy=" + shown + ",ro", "-oproxy=" + shown, "--noproxy=a,b"])
    }

    func testTLSProxyAndCredentialOptionsReachTheHTTPLayer() throws {
        let options = try MountOptions.parse([
            "--cacert", "/etc/hostname", "--insecure", "--proxy", "http://p:3128", "--noproxy", "a,b",
            "--header", "X-Key: 1", "--cookie", "s=2", "--netrc", "--user-agent", "agent/1", "--http2",
        ])
        let configuration = MountConfiguration(options, environment: ["SSL_CERT_DIR": "/certs"])
        XCTAssertEqual(configuration.http.caCertificateFile, "/etc/hostname")
        XCTAssertEqual(configuration.http.caCertificateDirectory, "/certs", "SSL_CERT_DIR, as curl reads it")
        XCTAssertTrue(configuration.http.insecure)
        XCTAssertEqual(configuration.http.proxy, "http://p:3128")
        XCTAssertEqual(configuration.http.noProxy, "a,b")
        XCTAssertEqual(configuration.http.netrcFile, "", "--netrc: ~/.netrc")
        XCTAssertEqual(configuration.http.userAgent, "agent/1")
        XCTAssertTrue(configuration.http.http2)
        XCTAssertEqual(configuration.headers, ["X-Key: 1", "Cookie: s=2"])
        let fromEnvironment = MountConfiguration(try MountOptions.parse([]), environment: ["SSL_CERT_FILE": "/ca.pem"])
        XCTAssertEqual(fromEnvironment.http.caCertificateFile, "/ca.pem")
        XCTAssertFalse(fromEnvironment.http.http2, "parallel HTTP/1.1 connections by default")
    }
}
