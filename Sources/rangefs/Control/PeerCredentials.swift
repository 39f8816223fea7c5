// Who is at the other end of a control connection. A unix socket's file says little: its owner is whoever bound
// it or renamed it there, and a socket file can be moved. The kernel's record of the process that called `listen`
// (for the client) or `connect` (for the daemon) is what both ends check before a request byte is read or sent,
// so neither talks to another user (issue 45).

import CLinux
import Glibc

/// The PID and effective uid of the peer of a connected unix socket (`getsockopt(SO_PEERCRED)`).
struct PeerCredentials: Equatable {
    let pid: pid_t
    let uid: uid_t

    /// `getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED)`; nil if the kernel gives none (not a unix socket).
    static func of(_ descriptor: Int32) -> PeerCredentials? {
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard rfs_peer_credentials(descriptor, &pid, &uid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid)
    }

    /// Whether the peer is this process's own user (its effective uid, which SO_PEERCRED reports): the only
    /// peer either end talks to. Root is no exception: root runs `sudo -u USER rangefs status` for a user's mount.
    var isSameUser: Bool { uid == geteuid() }
}
