// What `rangefs mount` does, as a straight line (libfuse's hello_ll.c): parse sources, go to the background,
// check the mount point, lock the cache, probe the URLs, mount, serve until unmounted, commit, exit.
//
// Background mode re-executes this program in the foreground as a new session, with its stderr on a pipe. The
// child reports each bad URL there and then a readiness line; the parent copies the reports to its own stderr
// and exits with the child's status only once the mount is ready (or has failed), as mount(8) expects.

import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import RangeFSCache
import RangeFSCatalog
import RangeFSControl
import RangeFSFetch
import RangeFSFileSystem
import RangeFSFUSE
import RangeFSHTTP
import RangeFSSystem

/// The readiness line a background child writes before it detaches from the parent's pipe.
let readinessMarker = "\u{1}rangefs-ready "
/// Set in a background child's environment.
let daemonChildVariable = "RANGEFS_DAEMON_CHILD"

struct MountRunner {
    let mountpoint: String
    let urls: [String]
    let configuration: MountConfiguration

    /// Exit codes, also listed in `rangefs --help`.
    enum Status {
        static let mounted: Int32 = 0
        static let failed: Int32 = 1
        static let someFailed: Int32 = 2
    }

    /// Why a mount stopped before it was ready; printed as one line.
    struct Failure: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    func run() -> Int32 {
        let isChild = ProcessInfo.processInfo.environment[daemonChildVariable] == "1"
        if !configuration.foreground && !isChild { return Daemon.spawnAndWait() }
        return mountAndServe(reportReadiness: isChild)
    }

    private func mountAndServe(reportReadiness: Bool) -> Int32 {
        // A write to a closed pipe or socket fails with EPIPE instead of killing the mount: the parent's stderr
        // pipe closes as soon as it reads the readiness line (a log line of another thread may still be on its
        // way there), and a control client may hang up before its answer.
        signal(SIGPIPE, SIG_IGN)
        let target = MountPoint.absolute(mountpoint)
        // A stop before the mount starts ends the process here (SignalWatcher.swift).
        let signals = SignalWatcher { signal in
            printError("rangefs: stopped by \(SignalWatcher.name(signal)) before \(target) was mounted; nothing is "
                       + "mounted there")
            if reportReadiness { Daemon.reportReady(Status.failed, logFile: nil) }
            _exit(Status.failed)
        }
        defer { signals.cancel() }
        let destination = LogDestination()
        LoggingSystem.bootstrap { label in RangefsLogHandler(label: label, destination: destination) }
        var logger = Logger(label: "rangefs")
        logger.logLevel = configuration.verbose ? .debug : .info
        func fail(_ message: String) -> Int32 {
            printError("rangefs: " + message)
            if reportReadiness { Daemon.reportReady(Status.failed, logFile: nil) }
            return Status.failed
        }

        // Made first and handed to each part at its birth: the mount's counters, the queue through which the
        // store and the scheduler report to the file system (EntryEvent.swift), the kernel's notifier (given
        // the session once it is mounted) and the passthrough capability the FUSE adapter settles.
        let metrics = Metrics()
        let reports = EventQueue<EntryEvent>()
        let kernel = FUSEKernelNotifier()
        let passthrough = LockedBox(PassthroughMode.pending)
        let store: CacheStore
        var sources: [MountSource]
        do {
            sources = try givenSources()
            // Before anything is mounted: a mount whose control socket another user could take is refused (issue
            // 45), rather than served without `rangefs status` and friends or with them talking to someone else.
            try ControlSocketFolder.prepare(controlSocketFolder, uid: geteuid())
            if let problem = MountPoint.prepare(target, nonEmpty: configuration.nonEmpty, logger: logger) { throw Failure(problem) }
            store = try CacheStore(root: configuration.cacheRoot, settings: configuration.store, reports: reports,
                                   metrics: metrics, logger: logger)
        } catch let failure as Failure {
            return fail(failure.message)
        } catch {
            return fail("\(error)")
        }
        let credentials: CredentialTable
        do {
            credentials = try loadCredentials(for: &sources, store: store)
        } catch let failure as Failure {
            return fail(failure.message)
        } catch {
            return fail("\(error)")
        }
        // The one writer of the saved set, for this mount's start and then its file system's verbs.
        let savedSet = SavedSet(store: store)
        let savedFiles = addSavedFiles(of: savedSet, store: store, to: &sources, credentials: credentials)
        if sources.isEmpty { return fail("nothing to mount: give URLs or --list FILE (this cache has no saved files)") }
        // What weakens this mount: logged once now, and shown by every `status`.
        let warnings = configuration.http.insecure
            ? ["--insecure: TLS certificates are not verified; anyone on the network path can change the data"] : []
        for warning in warnings { logger.warning("\(warning)") }

        let session = HTTPSession(options: configuration.http, credentials: credentials)
        if let chain = session.proxyChain {
            logger.info("proxies: \(chain.report)")
        }
        let engine = CurlEngine(session: session, logger: logger)
        let demandEngine = CurlEngine(session: session, logger: logger)
        defer {
            engine.shutdown()
            demandEngine.shutdown()
        }
        let saved = Set(savedFiles.map(\.url))
        var probed = probe(sources, with: engine, store: store, saved: saved)
        let catalog = probed.catalog

        var schedulerEvents = FetchScheduler.Events()
        schedulerEvents.reports = reports
        let scheduler = FetchScheduler(fetcher: engine, demandFetcher: demandEngine, policy: configuration.fetch,
                                       events: schedulerEvents, metrics: metrics, logger: logger)
        var proxyReport: (@Sendable () -> String)?
        if let chain = session.proxyChain { proxyReport = { chain.report } }
        let fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler, reports: reports, kernel: kernel,
                                 passthrough: passthrough, settings: configuration.fileSystem, credentials: credentials,
                                 savedSet: savedSet, proxyReport: proxyReport, logger: logger)
        for source in sources where source.archives { fileSystem.showArchives(of: source.url) }
        fileSystem.markProbed(offline: probed.offline)
        for (metadata, source) in probed.configured {
            fileSystem.configure(metadata, mirrors: source.mirrors, checksum: source.checksum,
                                 mirrorsFromLinks: configuration.mirrorsFromLinks)
        }
        listDirectories(of: fileSystem, saved: saved, into: &probed)
        // Only now is it known whether anything mounts, and so whether the unmountable URLs stay saved.
        let mounting = catalog.totals.files > 0 || !catalog.directorySources.isEmpty
        for failure in probed.unmountable {
            let kept = mounting || failure.wasSaved
            let note = !failure.keepSaved || !kept ? ""
                : mounting ? ". It is not mounted this time, and stays in this cache's list (rangefs rm \(failure.name) drops it)"
                : ". It stays in this cache's list"
            printError("rangefs: \(failure.shown): \(failure.reason)\(note)")
        }
        guard mounting else {
            // Each URL was named with its reason above; a line more would say nothing new.
            if probed.unmountable.isEmpty { printError("rangefs: no URL could be mounted") }
            if reportReadiness { Daemon.reportReady(Status.failed, logFile: nil) }
            return Status.failed
        }
        // A URL given or saved before stays saved unless its server said it is gone.
        fileSystem.keepUnmounted(probed.unmounted)
        let controlService = ControlService(fileSystem: fileSystem)
        var metricsServer: MetricsServer?
        if let metrics = configuration.metrics {
            do {
                metricsServer = try MetricsServer(address: metrics.address, port: metrics.port) {
                    controlService.handle(ControlRequest(command: .metrics)).message ?? ""
                }
            } catch let failure as Failure {
                return fail(failure.message)
            } catch {
                return fail("\(error)")
            }
        }
        defer { metricsServer?.stop() }
        let mount: FUSEMount
        signals.mounting()
        do {
            mount = try FUSEMount(fileSystem: fileSystem, kernel: kernel, passthrough: passthrough, mountpoint: target,
                                  settings: configuration.mount, logger: logger)
            try mount.start()
        } catch {
            return fail("\(error)")
        }
        signals.watch(mount)
        store.startCommitting()
        fileSystem.restorePins(savedFiles)
        fileSystem.saveMountedSet()
        fileSystem.startOfflineChecks()
        if configuration.fileSystem.prefetch == .all { fileSystem.fillAll() }
        UnmountReport.clear(mountpoint: target)
        let control = startControl(for: controlService, mountpoint: target, warnings: warnings, log: destination,
                                   logger: logger)
        let status = probed.unmountable.isEmpty ? Status.mounted : Status.someFailed
        if !probed.offline.isEmpty {
            printError("rangefs: \(probed.offline.count) file(s) mounted from the cache alone; they are checked again "
                       + "every \(Revalidator.offlineCheckInterval.seconds) s until their server answers")
        }
        if reportReadiness {
            // In the background the log goes to syslog, or, where no syslog daemon listens (a container, a
            // minimal system), to a file in the cache directory: never to nowhere.
            var logFile = configuration.logFile
            if logFile == nil && rfs_syslog_reachable() == 0 {
                logFile = configuration.cacheRoot + "/rangefs.log"
                printError("rangefs: logging to \(logFile!) (no syslog daemon listens on /dev/log)")
            }
            Daemon.reportReady(status, logFile: logFile)
            if logFile == nil { destination.use(.syslog) }
        }
        logger.info("mounted \(catalog.totals.files) file(s) on \(target)")
        logger.info("FUSE passthrough \(passthrough.withLock { $0 }.description)")
        SystemdNotifier.notify("READY=1\nSTATUS=mounted \(catalog.totals.files) file(s) on \(target)\nMAINPID=\(getpid())")

        mount.waitUntilUnmounted()
        SystemdNotifier.notify("STOPPING=1")
        store.markStopping()
        fileSystem.stopOfflineChecks()
        control?.stop()
        // Commit first: a reply that a late completion (a listing or read still in flight) sends after the session
        // is gone must find the cache already durable.
        let notKept = store.close()
        mount.finish()
        // `rangefs unmount` is not this process's parent: it learns what the cache kept from this report.
        UnmountReport.write(UnmountReport(committed: notKept == nil, notKept: notKept), mountpoint: target,
                            logger: logger)
        logger.info("unmounted \(target)")
        return notKept == nil ? status : Status.failed
    }

    /// Where this user's control sockets live (`ControlSocket.directory`).
    private var controlSocketFolder: String {
        ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid())
    }

    /// Serves `rangefs status` and friends on the mount's control socket; nil (and a warning) if it cannot.
    private func startControl(for service: ControlService, mountpoint: String, warnings: [String],
                              log: LogDestination, logger: Logger) -> ControlServer? {
        let socketPath = ControlSocket.path(forMountpoint: mountpoint, in: controlSocketFolder)
        do {
            return try ControlServer(path: socketPath, logger: logger) { request in
                var response = service.handle(request)
                response.mountpoint = mountpoint
                if request.command == .status {
                    // This mount's standing warnings, then the service's own (a failing cache disk).
                    response.warnings = warnings + (response.warnings ?? [])
                    response.recentErrors = log.recentErrors
                }
                return response
            }
        } catch {
            printError("rangefs: no control socket at \(socketPath) (\(error)); rangefs status and friends will not reach this mount")
            return nil
        }
    }
}
