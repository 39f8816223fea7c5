// What `rangefs mount` does, as a straight line (libfuse's hello_ll.c): parse sources, go to the background,
// check the mount point, lock the cache, probe the URLs, mount, serve until unmounted, commit, exit.
//
// Background mode re-executes this program in the foreground as a new session, with its stderr on a pipe. The
// child reports each bad URL there and then a readiness line; the parent copies the reports to its own stderr
// and exits with the child's status only once the mount is ready (or has failed), as mount(8) expects.

import Foundation
import Glibc
import Logging
import RangeFSCore
import RangeFSFUSE
import RangeFSHTTP

/// The readiness line a background child writes before it detaches from the parent's pipe.
let readinessMarker = "\u{1}rangefs-ready "
/// Set in a background child's environment.
let daemonChildVariable = "RANGEFS_DAEMON_CHILD"

struct MountRunner {
    let mountpoint: String
    let urls: [String]
    let options: MountOptions

    /// Exit codes, also listed in `rangefs --help`.
    enum Status {
        static let mounted: Int32 = 0
        static let failed: Int32 = 1
        static let someFailed: Int32 = 2
    }

    func run() -> Int32 {
        let isChild = ProcessInfo.processInfo.environment[daemonChildVariable] == "1"
        if !options.foreground && !isChild { return Daemon.spawnAndWait() }
        return mountAndServe(reportReadiness: isChild)
    }

    private func mountAndServe(reportReadiness: Bool) -> Int32 {
        let signals = SignalWatcher()
        defer { signals.cancel() }
        let destination = LogDestination()
        LoggingSystem.bootstrap { label in RangefsLogHandler(label: label, destination: destination) }
        var logger = Logger(label: "rangefs")
        logger.logLevel = options.verbose ? .debug : .info
        func fail(_ message: String) -> Int32 {
            printError("rangefs: " + message)
            if reportReadiness { Daemon.reportReady(Status.failed, logFile: nil) }
            return Status.failed
        }

        // Sources: command-line URLs, then list files, in order.
        var sources = urls.map(MountSource.init(parsing:))
        for path in options.list {
            guard let data = FileManager.default.contents(atPath: path) else {
                return fail("cannot read list file \(path); check the path and its permissions")
            }
            sources += MountSource.parseList(String(decoding: data, as: UTF8.self))
        }
        let target = MountPoint.absolute(mountpoint)
        if let problem = MountPoint.prepare(target, logger: logger) { return fail(problem) }

        let blockSize = (try? options.blockSizeBytes()) ?? 64 << 10
        let store: CacheStore
        do {
            store = try CacheStore(root: options.cache.map(MountPoint.absolute)
                                   ?? CacheStore.defaultRoot(environment: ProcessInfo.processInfo.environment),
                                   commitInterval: .milliseconds(Int(options.commitInterval * 1000)),
                                   commitBytes: (try? options.commitByteCount()) ?? 16 << 20,
                                   maxBytes: try? options.cacheSizeLimit(), logger: logger)
        } catch {
            return fail("\(error)")
        }
        // The files saved with the cache (added at runtime, or mounted before) come back too.
        var savedFiles: [SavedFile] = []
        do {
            savedFiles = try store.savedFiles()
            for saved in savedFiles where !sources.contains(where: { $0.url == saved.url }) {
                sources.append(MountSource(url: saved.url, name: saved.name))
            }
        } catch {
            printError("rangefs: \(store.root)/catalog.json is damaged (\(error)); mounting only the given URLs")
        }
        if sources.isEmpty { return fail("nothing to mount: give URLs or --list FILE (this cache has no saved files)") }

        // Probe every URL at once; a bad one is reported by name and the rest still mount.
        var http = HTTPOptions()
        http.connectTimeout = options.connectTimeout
        http.lowSpeedTime = options.timeout
        http.maxHostConnections = options.connectionsPerHost
        http.maxTotalConnections = max(64, options.connections * 2)
        let engine = CurlEngine(options: http, logger: logger)
        let demandEngine = CurlEngine(options: http, logger: logger)
        defer {
            engine.shutdown()
            demandEngine.shutdown()
        }
        let catalog = Catalog()
        var failures = 0
        for (source, result) in zip(sources, engine.probeAll(sources.map(\.url))) {
            switch result {
            case .success(let metadata):
                catalog.add(metadata, explicitName: source.name)
            case .failure(let error):
                failures += 1
                printError("rangefs: \(Redaction.redact(source.url)): \(error.userMessage)")
            }
        }
        if catalog.items.isEmpty { return fail("no URL could be mounted") }

        var policy = FetchPolicy()
        policy.attempts = options.retries
        policy.maxTransfers = options.connections
        policy.connectionsPerFile = options.connectionsPerFile
        policy.fillBytesPerSecond = try? options.bandwidthLimit()
        policy.maxDownloads = options.maxDownloads
        let scheduler = FetchScheduler(fetcher: engine, demandFetcher: demandEngine, store: store, policy: policy,
                                       logger: logger)
        let fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler, blockSize: blockSize,
                                 readaheadMaximum: (try? options.readaheadBytes()) ?? 32 << 20,
                                 prefetch: options.prefetch,
                                 revalidateAfter: .milliseconds(Int(options.revalidate * 1000)), logger: logger)
        for item in catalog.items { fileSystem.markValidated(item.metadata.url) }
        var settings = MountSettings()
        settings.allowOther = options.allowOther
        settings.owner = Owner(uid: options.uid ?? getuid(), gid: options.gid ?? getgid())
        settings.umask = options.umaskValue()
        settings.kernelReadaheadKiB = options.kernelReadahead > 0 ? options.kernelReadahead : nil
        let mount: FUSEMount
        do {
            mount = try FUSEMount(fileSystem: fileSystem, mountpoint: target, settings: settings, logger: logger)
            try mount.start()
        } catch {
            return fail("\(error)")
        }
        signals.watch(mount)
        store.startCommitting()
        fileSystem.restorePins(savedFiles)
        fileSystem.saveCatalog()
        if options.prefetch == .all { fileSystem.fillAll() }
        let socketPath = ControlSocket.path(
            forMountpoint: target,
            in: ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid()))
        let control: ControlServer?
        do {
            control = try ControlServer(path: socketPath, logger: logger) { request in
                var response = fileSystem.handle(request)
                response.mountpoint = target
                return response
            }
        } catch {
            control = nil
            printError("rangefs: no control socket at \(socketPath) (\(error)); rangefs status and friends will not reach this mount")
        }
        let status = failures > 0 ? Status.someFailed : Status.mounted
        if reportReadiness {
            Daemon.reportReady(status, logFile: options.logFile)
            if options.logFile == nil { destination.use(.syslog) }
        }
        logger.info("mounted \(catalog.items.count) file(s) on \(target)")
        SystemdNotifier.notify("READY=1\nSTATUS=mounted \(catalog.items.count) file(s) on \(target)\nMAINPID=\(getpid())")

        mount.waitUntilUnmounted()
        SystemdNotifier.notify("STOPPING=1")
        control?.stop()
        mount.finish()
        store.close()
        logger.info("unmounted \(target)")
        return status
    }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a clean unmount. It is installed before anything is mounted or reported
/// ready, so a stop that comes early (right after systemd's READY=1, say) is remembered and carried out as soon
/// as the mount exists, never lost.
final class SignalWatcher: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written only in init, before the watcher is shared; `state` is locked.
    private var sources: [DispatchSourceSignal] = []
    private let state = LockedBox<(stopRequested: Bool, mount: FUSEMount?)>((false, nil))

    init() {
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.stop() }
            source.resume()
            sources.append(source)
        }
    }

    /// The mount to unmount on a signal; if one already came, it is unmounted now.
    func watch(_ mount: FUSEMount) {
        let stopNow = state.withLock { state -> Bool in
            state.mount = mount
            return state.stopRequested
        }
        if stopNow { mount.requestUnmount() }
    }

    /// Whether a signal asked to stop (before there was a mount to unmount).
    var stopRequested: Bool { state.withLock { $0.stopRequested } }

    private func stop() {
        let mount = state.withLock { state -> FUSEMount? in
            state.stopRequested = true
            return state.mount
        }
        mount?.requestUnmount()
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
