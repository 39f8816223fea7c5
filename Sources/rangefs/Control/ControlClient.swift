// The client side of the control socket. Every request has a deadline: a daemon that is stopped (SIGSTOP, a
// debugger, a frozen machine) still accepts connections in the kernel but never answers, and a client that waited
// for it would hang its shell. When the deadline passes, the client names the mount, the daemon's PID (the socket
// tells it, SO_PEERCRED) and the state /proc gives for it.
//
// The client sends nothing to a socket another user could have put there (issue 45): its folder must be a private
// folder of this user (ControlSocketFolder.swift), and the process listening on it must be this user's (SO_PEERCRED),
// else it refuses before a byte of the request (which may carry a token) leaves.

import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSSystem

/// Talks to a running mount's control socket.
struct ControlClient {
    /// How long a command waits for the mount's answer unless told otherwise (`--timeout`).
    static let defaultTimeout = 10.0

    let socketPath: String
    let mountpoint: String
    /// When this client gives up on the mount.
    let deadline: ContinuousClock.Instant

    /// The mount to talk to, `mountpoint` if given, else the only one running, asked within `timeout` seconds.
    /// `command` names the subcommand, for the hint when several mounts run.
    static func locate(_ mountpoint: String?, timeout: Double = defaultTimeout,
                       command: String = "status") throws -> ControlClient {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        let directory = try socketDirectory()
        if let mountpoint {
            let target = MountPoint.absolute(mountpoint)
            return ControlClient(socketPath: ControlSocket.path(forMountpoint: target, in: directory),
                                 mountpoint: target, deadline: deadline)
        }
        let (live, silent, refused) = try probeSockets(in: directory, deadline: deadline)
        if live.count == 1 { return live[0] }
        if live.isEmpty, let first = silent.first { throw first }
        if live.isEmpty, let (point, health) = MountPoint.unhealthyRangefsMount(refused: refused, directory: directory) {
            throw CLIError(health == .dead ? MountPoint.deadMountMessage(point) : MountPoint.notAnsweringMessage(point))
        }
        guard !live.isEmpty else { throw CLIError("no running rangefs mount found (no control socket in \(directory))") }
        let mounts = live.map(\.mountpoint).sorted()
        throw CLIError("\(mounts.count) rangefs mounts are running (\(mounts.joined(separator: ", "))); name one, "
                       + "e.g. rangefs \(command) --mount \(mounts[0])")
    }

    /// Every mount of this user that answers (for `rangefs ui --all`), in mount point order; throws when none does.
    static func locateAll(timeout: Double = defaultTimeout) throws -> [ControlClient] {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        let directory = try socketDirectory()
        let (live, silent, _) = try probeSockets(in: directory, deadline: deadline)
        if live.isEmpty, let first = silent.first { throw first }
        guard !live.isEmpty else { throw CLIError("no running rangefs mount found (no control socket in \(directory))") }
        return live.sorted { $0.mountpoint < $1.mountpoint }
    }

    /// This user's folder of control sockets, checked to be a private folder of this user.
    private static func socketDirectory() throws -> String {
        let directory = ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid())
        do {
            _ = try ControlSocketFolder.check(directory, uid: geteuid())
        } catch {
            throw CLIError(error.description)
        }
        return directory
    }

    /// Asks each socket in `directory` who serves it: the mounts that answer, the errors of those that are
    /// silent, and the sockets nobody listens on (left by a daemon that is gone). Throws at a foreign socket.
    private static func probeSockets(in directory: String, deadline: ContinuousClock.Instant) throws
        -> (live: [ControlClient], silent: [CLIError], refused: Set<String>) {
        // No socket directory: no daemon runs, and the caller says so with the mount it looked for.
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".sock") }.map { directory + "/" + $0 }
        var live: [ControlClient] = []
        var silent: [CLIError] = []
        var refused: Set<String> = []
        for path in sockets {
            // A share of the deadline each, so that one silent mount cannot use it all.
            let share = min(deadline, ContinuousClock.now + .seconds(2))
            let probe = ControlClient(socketPath: path, mountpoint: "", deadline: share)
            do {
                let answer = try probe.send(ControlRequest(command: .identify))
                if answer.ok {
                    live.append(ControlClient(socketPath: path, mountpoint: answer.mountpoint ?? "", deadline: deadline))
                }
            } catch let error as Unresponsive {
                silent.append(CLIError(error.description))
            } catch let error as ForeignSocket {
                throw CLIError(error.description)
            } catch {
                refused.insert(path)  // a socket left by a daemon that is gone
            }
        }
        return (live, silent, refused)
    }

    /// A mount that accepted the request but did not answer before the deadline.
    struct Unresponsive: Error, CustomStringConvertible {
        let description: String
    }

    /// A socket, or a socket folder, that another user could have put there: nothing was sent to it.
    struct ForeignSocket: Error, CustomStringConvertible {
        let description: String
    }

    /// Sends one request and returns the answer; gives up at the deadline with `Unresponsive`, and refuses a
    /// socket of another user with `ForeignSocket` before sending anything.
    func send(_ request: ControlRequest) throws -> ControlResponse {
        do {
            _ = try ControlSocketFolder.check(FileSystemCalls.parentDirectory(of: socketPath), uid: geteuid())
        } catch {
            throw ForeignSocket(description: error.description)
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CLIError("cannot make a socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        // Bounds connect (a full backlog makes it wait) and send.
        setTimeout(descriptor, SO_SNDTIMEO)
        guard case (var address, let length)? = unixSocketAddress(socketPath) else { throw CLIError("socket path too long") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) }
        }
        let place = mountpoint.isEmpty ? socketPath : mountpoint
        guard connected == 0 else {
            if errno == EAGAIN || errno == EINPROGRESS { throw unresponsive(descriptor) }
            // Nobody listens: a daemon killed with its mount still in place is the case to name, with its cure.
            if !mountpoint.isEmpty {
                switch MountPoint.health(of: mountpoint) {
                case .dead: throw CLIError(MountPoint.deadMountMessage(mountpoint))
                case .notAnswering: throw CLIError(MountPoint.notAnsweringMessage(mountpoint))
                case .fine: break
                }
            }
            throw CLIError("no running rangefs mount at \(place) (cannot reach \(socketPath))")
        }
        try checkPeer(descriptor)
        var data = try JSONEncoder().encode(request)
        data.append(UInt8(ascii: "\n"))
        let sent = data.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw unresponsive(descriptor) }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !received.contains(UInt8(ascii: "\n")) {
            guard setTimeout(descriptor, SO_RCVTIMEO) else { throw unresponsive(descriptor) }
            let got = recv(descriptor, &buffer, buffer.count, 0)
            if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw unresponsive(descriptor) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            received.append(contentsOf: buffer[..<got])
        }
        guard let line = received.split(separator: UInt8(ascii: "\n")).first else {
            throw CLIError("the mount at \(place) closed the connection without an answer; see its log")
        }
        var response = try JSONDecoder().decode(ControlResponse.self, from: Data(line))
        if response.mountpoint == nil { response.mountpoint = mountpoint }
        return response
    }

    /// Sends a request and turns a refusal into an error with the mount's message.
    func perform(_ request: ControlRequest) throws -> ControlResponse {
        let response: ControlResponse
        do {
            response = try send(request)
        } catch let error as Unresponsive {
            throw CLIError(error.description)
        } catch let error as ForeignSocket {
            throw CLIError(error.description)
        }
        guard response.ok else { throw CLIError(response.error ?? "the mount refused the request") }
        return response
    }

    /// Throws `ForeignSocket` unless the process listening on the connected `descriptor` is this user's.
    private func checkPeer(_ descriptor: Int32) throws(ForeignSocket) {
        let peer = PeerCredentials.of(descriptor)
        if let peer, peer.isSameUser { return }
        let who = peer.map { "\(UserAccounts.describe($0.uid)), pid \($0.pid)" } ?? "a process the kernel does not name"
        let place = mountpoint.isEmpty ? "" : " for \(mountpoint)"
        throw ForeignSocket(description: "the control socket \(socketPath)\(place) is served by \(who), not by you; "
                            + "rangefs sent it nothing (another user may be posing as the mount); remove it (rm "
                            + "\(socketPath), as root if you cannot) and remount")
    }

    /// Sets `option` (SO_RCVTIMEO or SO_SNDTIMEO) to the time left; false if none is.
    @discardableResult
    private func setTimeout(_ descriptor: Int32, _ option: Int32) -> Bool {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return false }
        let (seconds, attoseconds) = left.components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: max(1, Int(attoseconds / 1_000_000_000_000)))
        setsockopt(descriptor, SOL_SOCKET, option, &limit, socklen_t(MemoryLayout<timeval>.size))
        return true
    }

    /// The error for a mount that did not answer in time: who serves it and what state it is in.
    private func unresponsive(_ descriptor: Int32) -> Unresponsive {
        let place = mountpoint.isEmpty ? socketPath : mountpoint
        guard let pid = PeerCredentials.of(descriptor)?.pid, pid > 0 else {
            return Unresponsive(description: "the mount at \(place) did not answer in time; is its daemon frozen?")
        }
        let state = DaemonState.of(pid)
        let advice = state == .stopped
            ? "resume it with: kill -CONT \(pid)"
            : "see its log; to end it: kill \(pid), then fusermount3 -uz \(place)"
        return Unresponsive(description: "the mount at \(place) did not answer in time: its daemon (pid \(pid)) is \(state.rawValue); \(advice)")
    }
}

/// What /proc says a process is doing (the third field of /proc/PID/stat).
enum DaemonState: String {
    case stopped, tracedStop = "stopped by a debugger", waitingForDisk = "waiting for the disk (state D)",
         zombie = "a zombie (exited, not reaped)", running = "running but not answering", gone = "gone"

    static func of(_ pid: pid_t) -> DaemonState {
        // No stat file: the process is gone.
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")"),
              let code = stat[stat.index(after: close)...].split(separator: " ").first
        else { return .gone }
        switch code {
        case "T": return .stopped
        case "t": return .tracedStop
        case "D": return .waitingForDisk
        case "Z": return .zombie
        default: return .running
        }
    }
}

/// A one-line error for the user; main prints it as `rangefs: MESSAGE` and exits 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
