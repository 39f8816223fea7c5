import Foundation
import Glibc
@testable import RangeFSControl
import RangeFSTestSupport
import XCTest

/// The control socket belongs to its user (issue 45, case 4). A user without `XDG_RUNTIME_DIR` gets
/// `/tmp/rangefs-UID`, a name another local user can take first (mode 777) and then put a socket of their own in:
/// the next `rangefs add 'URL?token=…'` handed them the token, and `status` could be forged. Two local users made
/// here play the parts (`useradd --system`): `rangefs-test-other` the other user, with a fake daemon (python) that
/// records every byte it receives and answers with a forged status; `rangefs-test-victim` a user whose commands
/// must refuse it. The daemon's side is played by root, whose socket folder is `$XDG_RUNTIME_DIR/rangefs`.
final class SocketOwnershipTests: MountTestCase {
    var other: TestUser!
    var victim: TestUser!
    /// The victim's fallback socket folder, `/tmp/rangefs-UID`.
    var victimFolder: String { "/tmp/rangefs-\(victim.uid)" }
    /// A mount point the commands name; nothing is mounted there.
    var namedMount: String { scratch.path + "/named" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try TestUser.ensure("rangefs-test-other")
        victim = try TestUser.ensure("rangefs-test-victim")
        // The test users reach the fake daemon's script and its record through the scratch folder.
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        try FakeDaemon.script.write(toFile: scratch.path + "/fake.py", atomically: true, encoding: .utf8)
        try removeVictimFolder()
    }

    override func tearDown() {
        try? removeVictimFolder()  // best effort: the next run removes it first anyway
        super.tearDown()
    }

    private func removeVictimFolder() throws {
        XCTAssertEqual(try Shell.run("/bin/rm", ["-rf", victimFolder]).status, 0)
    }

    /// The attack of the issue: the other user makes `/tmp/rangefs-VICTIM` (mode 777) first and serves the
    /// victim's socket path there. The victim's `add` with a token, `status --mount` and bare `status` refuse with
    /// one line naming the folder, its owner and the fix, and the fake daemon receives nothing. Before, the `add`
    /// sent it the URL with its token, and `status` printed the forged answer.
    func testCommandsRefuseAFallbackFolderAnotherUserMade() throws {
        let made = try Shell.run("/usr/bin/setpriv", other.runAs + ["/bin/mkdir", "-m", "777", victimFolder])
        XCTAssertEqual(made.status, 0, made.stderr)
        let socket = ControlSocket.path(forMountpoint: namedMount, in: victimFolder)
        let fake = try FakeDaemon(as: other, at: socket, scratch: scratch.path)
        defer { fake.stop() }

        let url = "http://127.0.0.1:9/secret.bin?token=SECRET-TOKEN-45"
        for arguments in [["add", "--mount", namedMount, url], ["status", "--mount", namedMount], ["status"]] {
            let result = try victimRuns(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments): \(result.stdout) \(result.stderr)")
            XCTAssertEqual(result.stdout, "", "\(arguments) printed what the other user's daemon said")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertTrue(result.stderr.hasPrefix("rangefs: the control socket folder \(victimFolder) belongs to "
                                                  + "uid \(other.uid) (rangefs-test-other), not to you"),
                          "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("set XDG_RUNTIME_DIR to a private folder"), result.stderr)
        }
        XCTAssertEqual(fake.received(), "", "the other user's daemon received the victim's requests")
    }

    /// The folder is the victim's own (mode 0700) but the socket in it is served by the other user (root moved it
    /// there: the file's place says nothing of who listens). `status --mount`, bare `status` and `add` refuse it by
    /// the kernel's word on the listening process (SO_PEERCRED), before a byte of the request is sent.
    func testCommandsRefuseASocketAnotherUserServes() throws {
        let made = try Shell.run("/usr/bin/setpriv", victim.runAs + ["/bin/mkdir", "-m", "700", victimFolder])
        XCTAssertEqual(made.status, 0, made.stderr)
        let own = scratch.path + "/other"
        XCTAssertEqual(mkdir(own, 0o700), 0)
        XCTAssertEqual(chown(own, other.uid, other.gid), 0)
        let fake = try FakeDaemon(as: other, at: own + "/fake.sock", scratch: scratch.path)
        defer { fake.stop() }
        let socket = ControlSocket.path(forMountpoint: namedMount, in: victimFolder)
        XCTAssertEqual(rename(own + "/fake.sock", socket), 0, String(cString: strerror(errno)))

        let url = "http://127.0.0.1:9/secret.bin?token=SECRET-TOKEN-45"
        for arguments in [["status", "--mount", namedMount], ["status"], ["add", "--mount", namedMount, url]] {
            let result = try victimRuns(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments): \(result.stdout) \(result.stderr)")
            XCTAssertEqual(result.stdout, "", "\(arguments) printed what the other user's daemon said")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertTrue(result.stderr.hasPrefix("rangefs: the control socket \(socket)"), result.stderr)
            XCTAssertTrue(result.stderr.contains("is served by uid \(other.uid) (rangefs-test-other), pid \(fake.pid), "
                                                 + "not by you; rangefs sent it nothing"), result.stderr)
        }
        XCTAssertEqual(fake.received(), "", "the other user's daemon received the victim's requests")
    }

    /// The daemon's side: a socket folder another user owns (mode 777), or its own folder open to others, is
    /// refused before anything is mounted, with one line naming the folder and the fix; no socket is put there.
    /// Before, the mount came up and put its socket in it (chmod 0700 by root succeeds, the owner stayed).
    func testMountRefusesASocketFolderAnotherUserCouldUse() throws {
        try origin.serveRandomFile("guarded.bin", size: 64 << 10)
        let runtime = scratch.path + "/runtime"
        XCTAssertEqual(mkdir(runtime, 0o700), 0)
        let folder = runtime + "/rangefs"
        XCTAssertEqual(mkdir(folder, 0o777), 0)
        XCTAssertEqual(chmod(folder, 0o777), 0)
        let states: [(owner: TestUser?, expected: String)] = [
            (other, "belongs to uid \(other.uid) (rangefs-test-other), not to you"),
            (nil, "has mode 777, not 700"),
        ]
        for state in states {
            XCTAssertEqual(chown(folder, state.owner?.uid ?? 0, state.owner?.gid ?? 0), 0)
            XCTAssertEqual(chmod(folder, 0o777), 0)
            let result = try rootMounts("guarded.bin", runtime: runtime)
            XCTAssertEqual(result.status, 1, result.stderr)
            XCTAssertFalse(driver.isMounted(mountpoint), "mounted with a socket folder another user can use")
            let lines = problemLines(result.stderr)
            XCTAssertEqual(lines.count, 1, result.stderr)
            XCTAssertTrue(lines.first?.hasPrefix("rangefs: the control socket folder \(folder) ") == true,
                          result.stderr)
            XCTAssertTrue(result.stderr.contains(state.expected), result.stderr)
            XCTAssertTrue(result.stderr.contains("set XDG_RUNTIME_DIR to a private folder"), result.stderr)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), [], "a socket was put there")
            driver.unmountAll()
            try driver.waitForUnlock(cache)
        }
    }

    /// The daemon answers only its own user: a client of another user that reaches the socket (root opened the
    /// folders for it) gets a refusal and no status; the mount's own user is still served.
    func testDaemonRefusesAClientOfAnotherUser() throws {
        try origin.serveRandomFile("served.bin", size: 64 << 10)
        let runtime = scratch.path + "/runtime"
        XCTAssertEqual(mkdir(runtime, 0o700), 0)
        let mounted = try rootMounts("served.bin", runtime: runtime)
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        let folder = runtime + "/rangefs"
        XCTAssertEqual(try FolderFacts.of(folder), FolderFacts(kind: .folder, owner: 0, permissions: 0o700))
        let socket = ControlSocket.path(forMountpoint: mountpoint, in: folder)
        for path in [runtime, folder] { XCTAssertEqual(chmod(path, 0o711), 0) }
        XCTAssertEqual(chmod(socket, 0o666), 0)

        let asked = try Shell.run("/usr/bin/setpriv", other.runAs + ["/usr/bin/python3", scratch.path + "/fake.py",
                                                                     "ask", socket, #"{"command":"status"}"#])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertTrue(asked.stdout.contains(#""ok":false"#), asked.stdout)
        XCTAssertTrue(asked.stdout.contains("this mount serves uid 0 (root) only"), asked.stdout)
        XCTAssertFalse(asked.stdout.contains("served.bin"), "another user got the mount's status: \(asked.stdout)")

        for path in [runtime, folder] { XCTAssertEqual(chmod(path, 0o700), 0) }
        let status = try Shell.run("/usr/bin/env", ["XDG_RUNTIME_DIR=" + runtime, driver.binary, "status",
                                                    "--mount", mountpoint])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.contains(mountpoint), status.stdout)
    }

    /// `rangefs mount` of `name` as root (default options), with `XDG_RUNTIME_DIR=runtime`.
    private func rootMounts(_ name: String, runtime: String) throws -> ProcessResult {
        if mkdir(mountpoint, 0o755) != 0 { XCTAssertEqual(errno, EEXIST) }
        let result = try Shell.run("/usr/bin/env", ["XDG_RUNTIME_DIR=" + runtime, driver.binary, "mount", mountpoint,
                                                    origin.url(name), "--cache", cache])
        if driver.isMounted(mountpoint) { driver.record(mountpoint) }
        return result
    }

    /// `rangefs ARGUMENTS` as the victim, without XDG_RUNTIME_DIR (ssh without a session, cron).
    private func victimRuns(_ arguments: [String]) throws -> ProcessResult {
        try Shell.run("/usr/bin/setpriv", victim.runAs + ["/usr/bin/env", "-u", "XDG_RUNTIME_DIR", "HOME=/nonexistent",
                                                          driver.binary] + arguments + ["--timeout", "20"],
                      timeout: 60)
    }
}

/// A local user made for a test (`useradd --system --no-create-home`) if missing.
struct TestUser {
    let name: String
    let uid: uid_t
    let gid: gid_t

    static func ensure(_ name: String) throws -> TestUser {
        if getpwnam(name) == nil {
            let made = try Shell.run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell",
                                                          "/usr/sbin/nologin", name])
            // Another test process may have made it meanwhile: it is looked up below either way.
            if made.status != 0 && getpwnam(name) == nil { throw TestSupportError("useradd \(name): \(made.stderr)") }
        }
        guard let entry = getpwnam(name) else { throw TestSupportError("no user \(name) after useradd") }
        return TestUser(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }

    /// setpriv's arguments that run a program as this user, with no supplementary groups.
    var runAs: [String] { ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"] }
}

/// Another user's daemon: listens on a unix socket as that user, records every byte it is sent, and answers each
/// connection with a forged status.
final class FakeDaemon {
    let process: BackgroundProcess
    let record: String
    var pid: pid_t { process.pid }

    init(as user: TestUser, at socket: String, scratch: String) throws {
        // A folder of that user's own for its record and its readiness mark.
        let folder = scratch + "/fake-\(UUID().uuidString)"
        guard mkdir(folder, 0o755) == 0, chown(folder, user.uid, user.gid) == 0 else {
            throw TestSupportError("cannot make \(folder): \(String(cString: strerror(errno)))")
        }
        record = folder + "/received"
        process = try BackgroundProcess("/usr/bin/setpriv", user.runAs + ["/usr/bin/python3", scratch + "/fake.py",
                                                                           "serve", socket, record],
                                        logPath: folder + "/log")
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: record + ".ready") {
            guard Date() < deadline, process.isRunning else {
                throw TestSupportError("the fake daemon did not listen: "
                                       + ((try? String(contentsOfFile: folder + "/log", encoding: .utf8)) ?? ""))
            }
            usleep(20_000)
        }
    }

    /// What it was sent, all connections together.
    func received() -> String {
        (try? String(contentsOfFile: record, encoding: .utf8)) ?? "(no record)"  // a missing record shows as such
    }

    func stop() { process.stop() }

    static let script = #"""
        import os, socket, sys
        if sys.argv[1] == "serve":
            path, record = sys.argv[2], sys.argv[3]
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            os.chmod(path, 0o777)
            listener.listen(16)
            open(record, "ab").close()
            open(record + ".ready", "w").close()
            while True:
                connection, _ = listener.accept()
                connection.settimeout(5)
                data = b""
                try:
                    while b"\n" not in data:
                        chunk = connection.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass
                with open(record, "ab") as out:
                    out.write(data)
                try:
                    connection.sendall(b'{"ok":true,"mountpoint":"/forged","pid":1,"message":"forged","files":[]}\n')
                except OSError:
                    pass
                connection.close()
        else:
            path, request = sys.argv[2], sys.argv[3]
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.settimeout(20)
            client.connect(path)
            try:
                client.sendall(request.encode() + b"\n")
            except OSError:
                pass  # a daemon that refuses this user answers without reading: its answer is read below
            answer = b""
            while b"\n" not in answer:
                chunk = client.recv(65536)
                if not chunk:
                    break
                answer += chunk
            sys.stdout.write(answer.decode())
        """#
}
