import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 37: the Debian package (mount-scripts/package.sh) installs a rangefs that runs where no Swift toolchain
/// is: with `/opt/swift` hidden (an empty folder bound over it in a mount namespace of its own), the installed
/// binary mounts a URL of a local nginx, copies it with the right sha256, shows it in `status` and unmounts; its
/// manual page and bash completion work; lintian finds no error or warning; it installs 40 MiB at most; `dpkg -r`
/// leaves only the user's cache.
final class PackageTests: MountTestCase {
    func testTheInstalledPackageRunsWithoutSwiftAndRemovesCleanly() throws {
        guard getuid() == 0 else { throw XCTSkip("SKIPPING: installing a package needs root") }
        // Never replace or remove a rangefs someone installed.
        let installed = try Shell.run("/usr/bin/dpkg-query", ["-W", "-f", "${Status}", "rangefs"])
        guard !installed.stdout.contains("installed"), !FileManager.default.fileExists(atPath: "/usr/bin/rangefs")
        else { throw XCTSkip("SKIPPING: a rangefs package or /usr/bin/rangefs is installed already; not replacing it") }

        let out = scratch.path + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let built = try Shell.run(repositoryRoot() + "/mount-scripts/package.sh", [out], timeout: 1800)
        XCTAssertEqual(built.status, 0, built.stderr)
        let deb = built.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(deb.hasSuffix("_amd64.deb") && FileManager.default.fileExists(atPath: deb), deb)
        guard built.status == 0 else { return }

        // Small enough: no Foundation, so none of ICU's 39 MB of data (with it the package installed 60 MB).
        let size = try Shell.run("/usr/bin/dpkg-deb", ["-f", deb, "Installed-Size"])
        let kibibytes = try XCTUnwrap(Int(size.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), size.stderr)
        XCTAssertLessThanOrEqual(kibibytes, 40 << 10, "the package installs \(kibibytes) KiB; the goal is 40 MiB at most")

        if FileManager.default.fileExists(atPath: "/usr/bin/lintian") {
            let lint = try Shell.run("/usr/bin/lintian", [deb], timeout: 600)
            // No error and no warning (the manual pages' NAME lines are fixed for whatis in package.sh).
            let problems = lint.stdout.split(separator: "\n").filter { $0.hasPrefix("E: ") || $0.hasPrefix("W: ") }
            XCTAssertEqual(problems, [], "lintian: \(lint.stdout)")
        }

        let install = try Shell.run("/usr/bin/dpkg", ["-i", deb], timeout: 600)
        XCTAssertEqual(install.status, 0, install.stderr)
        var removed = false
        defer { if !removed { _ = try? Shell.run("/usr/bin/dpkg", ["-r", "rangefs"], timeout: 600) } }

        // In a mount namespace of its own, /opt/swift empty: mount, copy, status, unmount.
        let digest = try origin.serveRandomFile("packaged.bin", size: 3 << 20)
        let (empty, mnt, cacheDir, copy) = (scratch.path + "/empty", scratch.path + "/pkgmnt", scratch.path + "/pkgcache",
                                            scratch.path + "/copy.bin")
        for folder in [empty, mnt] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let script = """
        set -u
        mount --bind '\(empty)' /opt/swift || exit 90
        [ -z "$(ls -A /opt/swift)" ] || exit 91
        trap 'fusermount3 -uz "\(mnt)" 2>/dev/null' EXIT
        /usr/bin/rangefs mount '\(mnt)' '\(origin.url("packaged.bin"))' --cache '\(cacheDir)' || exit 92
        cp '\(mnt)/packaged.bin' '\(copy)' || exit 93
        /usr/bin/rangefs status --mount '\(mnt)' || exit 94
        /usr/bin/rangefs unmount '\(mnt)' || exit 95
        """
        let run = try Shell.run("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", script],
                                timeout: 300)
        XCTAssertEqual(run.status, 0, "stdout: \(run.stdout)\nstderr: \(run.stderr)")
        XCTAssertTrue(run.stdout.contains(mnt), "status answered for the mount: \(run.stdout)")
        XCTAssertEqual(try Shell.sha256(of: copy), digest, "the copy made without /opt/swift is right")

        // The manual page and the bash completion of `rangefs mo<TAB>`.
        XCTAssertEqual(try Shell.run("/usr/bin/man", ["-w", "rangefs"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines), "/usr/share/man/man1/rangefs.1.gz")
        let completion = try Shell.run("/bin/bash", ["-c", """
            source /usr/share/bash-completion/completions/rangefs
            COMP_WORDS=(rangefs mo); COMP_CWORD=1; COMP_LINE='rangefs mo'; COMP_POINT=${#COMP_LINE}
            _rangefs rangefs mo rangefs
            printf '%s\\n' "${COMPREPLY[@]}"
            """])
        XCTAssertEqual(completion.stdout, "mount\n", completion.stderr)
        // Issue 45: `man rangefs` is the hand-written page, and no page's whatis line (man -k) holds quotes.
        let page = try Shell.run("/usr/bin/env", ["MANWIDTH=120", "/usr/bin/man", "rangefs"]).stdout
        XCTAssertTrue(page.contains("EXAMPLES") && page.contains("SEE ALSO") && page.contains("s3://"), page)
        let pages = try FileManager.default.contentsOfDirectory(atPath: "/usr/share/man/man1")
            .filter { $0.hasPrefix("rangefs") }.map { "/usr/share/man/man1/" + $0 }
        let whatis = try Shell.run("/usr/bin/lexgrog", pages).stdout.split(separator: "\n")
        XCTAssertGreaterThanOrEqual(whatis.count, pages.count, "one line a page, two for an alias: \(whatis)")
        XCTAssertEqual(whatis.filter { $0.contains(" - \"") || $0.hasSuffix("\"\"") }, [], "stray quotes in man -k")

        // dpkg -r leaves nothing of the package, and the user's cache as it was.
        let remove = try Shell.run("/usr/bin/dpkg", ["-r", "rangefs"], timeout: 600)
        XCTAssertEqual(remove.status, 0, remove.stderr)
        removed = remove.status == 0
        for path in ["/usr/bin/rangefs", "/usr/sbin/mount.fuse.rangefs", "/lib/systemd/system/rangefs@.service",
                     "/usr/share/man/man1/rangefs.1.gz", "/usr/share/bash-completion/completions/rangefs",
                     "/usr/share/doc/rangefs/copyright"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(path) is left after dpkg -r")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheDir), "the user's cache stays")
    }
}
