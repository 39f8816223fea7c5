// Whoever controls the control socket's folder can put a socket of their own at the mount's socket path, and then
// receives what the user sends (`rangefs add 'URL?token=…'`) and answers `status` as they like. `$XDG_RUNTIME_DIR`
// is made 0700 by the login manager; the fallback in /tmp (ssh without a session, cron, containers) is a name any
// local user can take first (issue 45). So the folder is checked with `lstat` before either end uses it: a real
// folder (not a link, which would lead elsewhere), owned by this user, mode 0700. A missing folder is made with
// mkdir(0700) and checked the same way. Anything else is refused with one line naming the folder, what is wrong
// and the fix; rangefs never repairs a folder another user may have had a hand in (a socket planted while it was
// open would stay). The decision is a pure function of what `lstat` says (`problem(with:uid:)`), so every folder
// state is tested without making it.

import Glibc
import RangeFSSystem

/// What `lstat` says of a socket folder: the facts the check decides on.
package struct FolderFacts: Equatable, Sendable {
    /// The file type, from `st_mode & S_IFMT`.
    package enum Kind: Equatable, Sendable {
        case folder, symbolicLink, regularFile, other
    }

    package var kind: Kind
    /// `st_uid`.
    package var owner: uid_t
    /// `st_mode & 0o7777`.
    package var permissions: mode_t

    /// `lstat(path)`: the facts of `path` itself (a link is not followed); nil if nothing is there.
    package static func of(_ path: String) throws(SystemError) -> FolderFacts? {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if Errno.current == .noEntry { return nil }
            throw SystemError(call: "lstat", path: path)
        }
        let kind: Kind = switch status.st_mode & S_IFMT {
        case S_IFDIR: .folder
        case S_IFLNK: .symbolicLink
        case S_IFREG: .regularFile
        default: .other
        }
        return FolderFacts(kind: kind, owner: status.st_uid, permissions: status.st_mode & 0o7777)
    }
}

/// The check of the control socket's folder, which both the daemon and the client make before they use it.
package enum ControlSocketFolder {
    /// What is wrong with a socket folder.
    package enum Problem: Equatable, Sendable {
        case symbolicLink
        case notAFolder(FolderFacts.Kind)
        case ownedByAnotherUser(uid_t)
        case openToOthers(mode_t)
    }

    /// Why the folder at `path`, as `lstat` describes it, must not hold this user's control socket; nil if it may:
    /// a real folder owned by `uid` with mode 0700 exactly (group and others have no access at all).
    package static func problem(with facts: FolderFacts, uid: uid_t) -> Problem? {
        switch facts.kind {
        case .symbolicLink: return .symbolicLink
        case .regularFile, .other: return .notAFolder(facts.kind)
        case .folder: break
        }
        // Ownership first: a folder another user owns is the attack itself, whatever its mode.
        if facts.owner != uid { return .ownedByAnotherUser(facts.owner) }
        if facts.permissions & 0o777 != 0o700 { return .openToOthers(facts.permissions) }
        return nil
    }

    /// The daemon's side: makes `path` with mkdir(0700) if it is missing (and its missing parents), then checks it
    /// with `lstat`; throws the one-line refusal if it is not a private folder of `uid`.
    package static func prepare(_ path: String, uid: uid_t) throws(SocketFolderRefusal) {
        if try facts(of: path) == nil {
            do {
                _ = try FileSystemCalls.makeDirectory(path, mode: 0o700)
            } catch {
                // Something may have appeared there meanwhile: it is judged below like any folder found.
                if try facts(of: path) == nil {
                    throw SocketFolderRefusal(path: path, reason: .cannotUse("\(error)"))
                }
            }
        }
        guard let facts = try facts(of: path) else {
            throw SocketFolderRefusal(path: path, reason: .cannotUse("it vanished as it was made"))
        }
        if let problem = problem(with: facts, uid: uid) {
            throw SocketFolderRefusal(path: path, reason: .problem(problem))
        }
    }

    /// The client's side: false if `path` does not exist (no daemon made it: none runs), true if it is a private
    /// folder of `uid`; throws the one-line refusal otherwise.
    package static func check(_ path: String, uid: uid_t) throws(SocketFolderRefusal) -> Bool {
        guard let facts = try facts(of: path) else { return false }
        if let problem = problem(with: facts, uid: uid) {
            throw SocketFolderRefusal(path: path, reason: .problem(problem))
        }
        return true
    }

    private static func facts(of path: String) throws(SocketFolderRefusal) -> FolderFacts? {
        do {
            return try FolderFacts.of(path)
        } catch {
            throw SocketFolderRefusal(path: path, reason: .cannotUse("\(error)"))
        }
    }
}

/// A control socket folder rangefs refuses to use; its description is the one line the user sees.
package struct SocketFolderRefusal: Error, Equatable, CustomStringConvertible {
    package enum Reason: Equatable, Sendable {
        case problem(ControlSocketFolder.Problem)
        /// `lstat` or `mkdir` failed: the system's words.
        case cannotUse(String)
    }

    package let path: String
    package let reason: Reason

    package init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    package var description: String {
        // Every fix ends the same way: XDG_RUNTIME_DIR names a private folder the login manager made.
        let elsewhere = "or set XDG_RUNTIME_DIR to a private folder of yours (mode 0700)"
        switch reason {
        case .problem(.symbolicLink):
            return "the control socket folder \(path) is a symbolic link, not a folder (another user may have made "
                + "it to catch your requests); remove it (rm \(path), as root if another user owns it) \(elsewhere)"
        case .problem(.notAFolder(let kind)):
            let what = kind == .regularFile ? "a regular file" : "not a folder"
            return "the control socket folder \(path) is \(what); remove it (rm \(path), as root if another user "
                + "owns it) \(elsewhere)"
        case .problem(.ownedByAnotherUser(let owner)):
            return "the control socket folder \(path) belongs to \(UserAccounts.describe(owner)), not to you "
                + "(another user may have made it to catch your requests); have root remove it (rm -r \(path)) "
                + elsewhere
        case .problem(.openToOthers(let mode)):
            return "the control socket folder \(path) has mode \(String(mode & 0o7777, radix: 8)), not 700 (other "
                + "users may have put a socket there); remove it (rm -r \(path)) \(elsewhere)"
        case .cannotUse(let error):
            return "cannot use the control socket folder \(path) (\(error)); \(elsewhere.dropFirst(3))"
        }
    }
}
