// Folder Control/: what `rangefs status|add|rm|...` asks of a running mount, and the wire protocol. It may use
// everything in the core; nothing in the core uses it but the executable.
//
// The control channel's service: it turns each request into one of the user's verbs that RangeFS offers (its
// front door: RangeFS+Verbs.swift, +Adding, +Status, +BlockMap) and the verb's answer into a reply. It holds no
// state and reaches none of the file system's parts (its revalidator, scheduler, store, credentials, kernel,
// catalog...): `.ci/check-seams` fails if code outside FileSystem/ names one (issue 48).

import Glibc
import RangeFSFileSystem

/// Answers the control channel's requests for one mounted file system.
public final class ControlService: Sendable {
    let fileSystem: RangeFS

    /// Serves `fileSystem`.
    package init(fileSystem: RangeFS) {
        self.fileSystem = fileSystem
    }

    /// Cells in a status answer's block map.
    static var mapWidth: Int { RangeFS.mapWidth }
    /// The most cells a blockmap answer holds.
    public static var blockMapMaxWidth: Int { RangeFS.blockMapMaxWidth }
    /// The states a default status leaves out: nothing to see there.
    public static var quietStates: Set<String> { RangeFS.quietStates }

    /// Answers one control request. Requests may come on several threads at once: a slow `add` does not hold up
    /// a `status`.
    public func handle(_ request: ControlRequest) -> ControlResponse {
        switch request.command {
        case .status:
            return reply(request.active == true ? fileSystem.activeStatus() : fileSystem.status(all: request.all ?? false))
        case .add:
            return reply(fileSystem.add(url: request.url, mirrors: request.mirrors ?? [], checksum: request.checksum,
                                        name: request.name, archives: request.archives ?? false))
        case .rm: return reply(fileSystem.remove(name: request.name, keepData: request.keepData ?? false))
        case .pause: return reply(fileSystem.pause(name: request.name, all: request.all ?? false))
        case .resume: return reply(fileSystem.resume(name: request.name, all: request.all ?? false))
        case .verify: return reply(fileSystem.verify(name: request.name))
        case .pin: return reply(fileSystem.pin(name: request.name))
        case .evict: return reply(fileSystem.evict(name: request.name))
        case .identify: return ControlResponse(ok: true, pid: getpid())
        case .metrics: return ControlResponse(ok: true, message: fileSystem.metricsText)
        case .blockmap: return reply(fileSystem.blockMap(name: request.name, width: request.width ?? Self.mapWidth))
        }
    }

    /// A verb's outcome as a reply: a summary is the message, a failure the error; problems a verb found at its
    /// end are both (and the reply is not ok).
    private func reply(_ outcome: VerbOutcome) -> ControlResponse {
        switch outcome {
        case .done(let summary): ControlResponse(ok: true, message: summary)
        case .failed(let reason): .failure(reason)
        case .foundProblems(let summary): ControlResponse(ok: false, error: summary, message: summary)
        }
    }

    /// A status as a reply: the files, and with a full status the totals, the daemon's pid, the passthrough mode,
    /// the proxy chain and the cache's problems as warnings.
    private func reply(_ status: MountStatus) -> ControlResponse {
        var response = ControlResponse(ok: true, files: status.files)
        response.pid = getpid()
        response.totals = status.totals
        response.passthrough = status.passthrough
        response.proxy = status.proxy
        if !status.cacheProblems.isEmpty { response.warnings = status.cacheProblems }
        return response
    }
}
