import Foundation
import Glibc
@testable import RangeFSControl
import RangeFSTestSupport
import XCTest

/// The check both ends of the control socket make of its folder (issue 45): the decision over every folder state
/// `lstat` can describe, then the real calls on real folders in each state.
final class ControlSocketFolderTests: XCTestCase {
    let me: uid_t = 1000

    /// Every kind, four owners and all 4,096 permission values: only a real folder of this user with mode 0700
    /// (any special bits aside) is accepted, and each refusal names what is wrong in the order a user should fix it.
    func testTheDecisionOverEveryFolderState() {
        let kinds: [FolderFacts.Kind] = [.folder, .symbolicLink, .regularFile, .other]
        let owners: [uid_t] = [me, 0, 1001, 65534]
        var accepted = 0
        for kind in kinds {
            for owner in owners {
                for permissions in mode_t(0)...0o7777 {
                    let facts = FolderFacts(kind: kind, owner: owner, permissions: permissions)
                    let problem = ControlSocketFolder.problem(with: facts, uid: me)
                    let expected: ControlSocketFolder.Problem? =
                        kind == .symbolicLink ? .symbolicLink
                        : kind != .folder ? .notAFolder(kind)
                        : owner != me ? .ownedByAnotherUser(owner)
                        : permissions & 0o777 != 0o700 ? .openToOthers(permissions)
                        : nil
                    XCTAssertEqual(problem, expected, "\(facts)")
                    if problem == nil { accepted += 1 }
                }
            }
        }
        // 0700 with each of the 8 combinations of setuid, setgid and sticky.
        XCTAssertEqual(accepted, 8)
    }

    /// Each refusal is one line that names the folder, what is wrong, and two fixes: remove it, or a private
    /// XDG_RUNTIME_DIR.
    func testEachRefusalIsOneLineNamingTheFolderAndTheFix() {
        let path = "/tmp/rangefs-1000"
        let problems: [ControlSocketFolder.Problem] = [.symbolicLink, .notAFolder(.regularFile), .notAFolder(.other),
                                                       .ownedByAnotherUser(0), .ownedByAnotherUser(4_000_000),
                                                       .openToOthers(0o777), .openToOthers(0o1755)]
        for problem in problems {
            let text = SocketFolderRefusal(path: path, reason: .problem(problem)).description
            XCTAssertFalse(text.contains("\n"), text)
            XCTAssertTrue(text.contains(path), text)
            XCTAssertTrue(text.contains("rm "), text)
            XCTAssertTrue(text.contains("set XDG_RUNTIME_DIR to a private folder"), text)
        }
        let foreign = SocketFolderRefusal(path: path, reason: .problem(.ownedByAnotherUser(0))).description
        XCTAssertTrue(foreign.contains("belongs to uid 0 (root), not to you"), foreign)
        let open = SocketFolderRefusal(path: path, reason: .problem(.openToOthers(0o777))).description
        XCTAssertTrue(open.contains("has mode 777, not 700"), open)
        let broken = SocketFolderRefusal(path: path, reason: .cannotUse("lstat: Permission denied")).description
        XCTAssertTrue(broken.hasPrefix("cannot use the control socket folder \(path) (lstat: Permission denied); set"),
                      broken)
    }

    /// The real calls: `prepare` (the daemon) makes a missing folder 0700 and accepts it; `check` (the client)
    /// says a missing folder holds no daemon; both refuse a link, a file, a fifo, a folder open to others and a
    /// folder of another user (the tests run as root, which may give a folder away), and repair none of them.
    func testPrepareAndCheckOnRealFolders() throws {
        let scratch = try TemporaryDirectory(prefix: "socket-folder")
        let uid = geteuid()
        let made = scratch.path + "/made/rangefs"
        XCTAssertFalse(try ControlSocketFolder.check(made, uid: uid))
        let mask = umask(0o022)
        defer { umask(mask) }
        try ControlSocketFolder.prepare(made, uid: uid)
        XCTAssertEqual(try FolderFacts.of(made), FolderFacts(kind: .folder, owner: uid, permissions: 0o700))
        XCTAssertTrue(try ControlSocketFolder.check(made, uid: uid))
        try ControlSocketFolder.prepare(made, uid: uid)  // a second mount finds it ready

        let states: [(name: String, make: (String) -> Int32, problem: ControlSocketFolder.Problem)] = [
            ("open", { mkdir($0, 0o700) == 0 ? chmod($0, 0o777) : -1 }, .openToOthers(0o777)),
            ("group", { mkdir($0, 0o700) == 0 ? chmod($0, 0o750) : -1 }, .openToOthers(0o750)),
            ("sticky-open", { mkdir($0, 0o700) == 0 ? chmod($0, 0o1777) : -1 }, .openToOthers(0o1777)),
            ("foreign", { mkdir($0, 0o700) == 0 ? chown($0, 4_000_123, 4_000_123) : -1 },
             .ownedByAnotherUser(4_000_123)),
            ("link", { symlink(made, $0) }, .symbolicLink),
            ("file", { path in
                let descriptor = open(path, O_CREAT | O_WRONLY, 0o600)
                return descriptor >= 0 ? close(descriptor) : -1
            }, .notAFolder(.regularFile)),
            ("fifo", { mkfifo($0, 0o600) }, .notAFolder(.other)),
        ]
        for state in states {
            let path = scratch.path + "/" + state.name
            XCTAssertEqual(state.make(path), 0, "making \(state.name): \(String(cString: strerror(errno)))")
            let before = try FolderFacts.of(path)
            let expected = SocketFolderRefusal(path: path, reason: .problem(state.problem))
            XCTAssertThrowsError(try ControlSocketFolder.prepare(path, uid: uid), state.name) { error in
                XCTAssertEqual(error as? SocketFolderRefusal, expected)
            }
            XCTAssertThrowsError(try ControlSocketFolder.check(path, uid: uid), state.name) { error in
                XCTAssertEqual(error as? SocketFolderRefusal, expected)
            }
            XCTAssertEqual(try FolderFacts.of(path), before, "\(state.name) is left as it was")
        }
        // A folder that cannot be made (its parent is a file) is refused with the system's reason.
        XCTAssertThrowsError(try ControlSocketFolder.prepare(scratch.path + "/file/rangefs", uid: uid)) { error in
            guard case .cannotUse(let reason)? = (error as? SocketFolderRefusal)?.reason else {
                return XCTFail("\(error)")
            }
            XCTAssertTrue(reason.contains("Not a directory"), reason)
        }
    }
}
