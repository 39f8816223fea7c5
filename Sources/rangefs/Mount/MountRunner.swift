// What `rangefs mount` does, as a straight line (libfuse's hello_ll.c): parse sources, go to the background,
// check the mount point, lock the cache, probe the URLs, mount, serve until unmounted, commit, exit.
//
// Background mode re-executes this program in the foreground as a new session, with its stderr on a pipe. The
// child reports each bad URL there and then a readiness line; the parent copies the reports to its own stderr
// and exits with the child's status only once the mount is ready (or has failed), as mount(8) expects.

import CLinux
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
        let signals = SignalWatcher()
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

        let target = MountPoint.absolute(mountpoint)
        let store: CacheStore
        var sources: [MountSource]
        do {
            sources = try givenSources()
            if let problem = MountPoint.prepare(target, logger: logger) { throw Failure(problem) }
            store = try CacheStore(root: configuration.cacheRoot, settings: configuration.store, logger: logger)
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
        let savedFiles = addSavedFiles(of: store, to: &sources, credentials: credentials)
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

        let scheduler = FetchScheduler(fetcher: engine, demandFetcher: demandEngine,
                                       policy: configuration.fetch, logger: logger)
        var proxyReport: (@Sendable () -> String)?
        if let chain = session.proxyChain { proxyReport = { chain.report } }
        let fileSystem = RangeFS(catalog: catalog, store: store, scheduler: scheduler,
                                 settings: configuration.fileSystem, credentials: credentials,
                                 proxyReport: proxyReport, logger: logger)
        for item in catalog.items where probed.offline[item.metadata.url] == nil {
            fileSystem.revalidator.markValidated(item.metadata.url)
        }
        for (url, reason) in probed.offline { fileSystem.revalidator.markOffline(url, reason: reason) }
        for (metadata, mirrors) in probed.mirrored {
            fileSystem.useMirrors(mirrors, for: metadata, fromLinks: configuration.mirrorsFromLinks)
        }
        listDirectories(of: fileSystem, saved: saved, into: &probed)
        // Only now is it known whether anything mounts, and so whether the unmountable URLs stay saved.
        let mounting = catalog.fileCount > 0 || !catalog.directorySources.isEmpty
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
        let controlService = ControlService(fileSystem: fileSystem, unmounted: probed.unmounted)
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
        do {
            mount = try FUSEMount(fileSystem: fileSystem, mountpoint: target, settings: configuration.mount,
                                  logger: logger)
            try mount.start()
        } catch {
            return fail("\(error)")
        }
        signals.watch(mount)
        store.startCommitting()
        controlService.restorePins(savedFiles)
        controlService.saveCatalog()
        fileSystem.revalidator.startOfflineChecks()
        if configuration.fileSystem.prefetch == .all { fileSystem.fillAll() }
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
        logger.info("mounted \(catalog.fileCount) file(s) on \(target)")
        logger.info("FUSE passthrough \(fileSystem.passthroughMode.withLock { $0 }.description)")
        SystemdNotifier.notify("READY=1\nSTATUS=mounted \(catalog.fileCount) file(s) on \(target)\nMAINPID=\(getpid())")

        mount.waitUntilUnmounted()
        SystemdNotifier.notify("STOPPING=1")
        store.markStopping()
        fileSystem.revalidator.stopOfflineChecks()
        control?.stop()
        // Commit first: a reply that a late completion (a listing or read still in flight) sends after the session
        // is gone must find the cache already durable.
        store.close()
        mount.finish()
        logger.info("unmounted \(target)")
        return status
    }

    /// The URLs of the command line, then those of the list files, in order.
    private func givenSources() throws -> [MountSource] {
        do {
            var sources = try urls.map { url throws(MountSourceError) in try MountSource(parsing: url) }
            for path in configuration.listFiles {
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw Failure("cannot read list file \(path); check the path and its permissions")
                }
                sources += try MountSource.parseList(String(decoding: data, as: UTF8.self), path: path)
            }
            return sources
        } catch let error as MountSourceError {
            throw Failure(error.message)
        }
    }

    /// The credentials of this mount: those saved with the cache, the user and password of each given URL
    /// (which leave the URL), and the given headers for the origins of the given URLs. Saved again if changed.
    private func loadCredentials(for sources: inout [MountSource], store: CacheStore) throws -> CredentialTable {
        let saved: [String: OriginCredentials]
        do {
            saved = try store.savedCredentials()
        } catch {
            throw Failure("\(store.root)/credentials.json is damaged (\(error)); remove it and mount with the "
                          + "credentials again")
        }
        let credentials = CredentialTable(saved)
        for index in sources.indices {
            sources[index].url = adopt(sources[index].url, into: credentials, store: store)
            sources[index].mirrors = sources[index].mirrors.map { credentials.adopt($0).url }
        }
        if !configuration.headers.isEmpty {
            for source in sources { credentials.setHeaders(configuration.headers, for: source.url) }
        }
        if credentials.snapshot != saved { try store.saveCredentials(credentials.snapshot) }
        return credentials
    }

    /// `full` without its `user:password@`, which go to `credentials`; the cached data an older rangefs stored
    /// under the URL with them moves to the URL without.
    private func adopt(_ full: String, into credentials: CredentialTable, store: CacheStore) -> String {
        let url = credentials.adopt(full).url
        guard full != url else { return url }
        do {
            try store.moveEntry(from: full, to: url)
        } catch {
            printError("rangefs: cannot move the cache entry of \(Redaction.redact(full)) to its URL without the "
                       + "credentials (\(error)); its data is fetched again")
        }
        return url
    }

    /// Adds the files saved with the cache (added at runtime, or mounted before) that `sources` lacks; returns
    /// what was saved. A damaged list is moved aside, never overwritten. A saved URL with `user:password@` (saved
    /// by an older rangefs) gives them to `credentials`, and is saved again without them.
    private func addSavedFiles(of store: CacheStore, to sources: inout [MountSource],
                               credentials: CredentialTable) -> [SavedFile] {
        do {
            var saved = try store.savedFiles()
            var adopted = false
            for index in saved.indices where URLOrigin.removingUserinfo(saved[index].url).user != nil {
                saved[index].url = adopt(saved[index].url, into: credentials, store: store)
                adopted = true
            }
            if adopted {
                do {
                    try store.saveCredentials(credentials.snapshot)
                    try store.saveFiles(saved)
                } catch {
                    printError("rangefs: cannot save the credentials apart from the URLs in \(store.root): \(error)")
                }
            }
            for file in saved where !sources.contains(where: { $0.url == file.url }) {
                // A directory mounted as the root is saved without a name.
                sources.append(MountSource(url: file.url, name: file.name.isEmpty ? nil : file.name,
                                           mirrors: file.mirrors ?? []))
            }
            return saved
        } catch {
            let path = "\(store.root)/catalog.json"
            do {
                let aside = try store.setAsideDamagedCatalog()
                printError("rangefs: \(path) is damaged (\(error)); kept it as \(aside) and mounting only the given "
                           + "URLs; add its URLs again with rangefs add")
            } catch let renaming {
                printError("rangefs: \(path) is damaged (\(error)) and cannot be moved aside (\(renaming)); "
                           + "move it away, then mount again")
            }
            return []
        }
    }

    /// What probing the sources gave: the catalog of the files to mount, those served from the cache alone
    /// (URL and why), the saved files that cannot be mounted but stay saved, and how many failed.
    struct Probed {
        let catalog = Catalog()
        var offline: [String: String] = [:]
        /// The saved files not mounted this run, which stay saved.
        var unmounted: [SavedFile] = []
        /// Every URL that could not be mounted, reported once the mount knows whether it goes ahead.
        var unmountable: [Unmountable] = []
        /// The mounted files that have mirrors (given, or named by their server's Link headers), and the given ones.
        var mirrored: [(RemoteMetadata, [String])] = []
    }

    /// A URL that could not be mounted, and why.
    struct Unmountable {
        let shown: String
        let reason: String
        let name: String
        /// Whether it stays in the saved set if the mount goes ahead (its server was unreachable, or it was
        /// saved before and the server did not say it is gone).
        let keepSaved: Bool
        let wasSaved: Bool
    }

    /// Probes every URL at once; a bad one is reported by name and the rest still mount. A URL whose server
    /// cannot be reached mounts from its cache entry if it has one. One that cannot be mounted stays in the
    /// saved set if its server was unreachable, or if it was saved before and the server did not say it is gone
    /// (a 403 may be an expired token; only `rangefs rm` or a 404/410 drops a saved URL).
    private func probe(_ sources: [MountSource], with fetcher: RangeFetching, store: CacheStore,
                       saved: Set<String>) -> Probed {
        var probed = Probed()
        // Directory URLs are listed on their first visit, not probed: the only one is the root, as with httpdirfs
        // and rclone; among other sources, or named, each is a folder.
        // A URL without the `/` is a directory too when its server redirects it to the URL with one.
        var directories = sources.filter { $0.url.hasSuffix("/") }
        let files = sources.filter { !$0.url.hasSuffix("/") }
        for (source, result) in zip(files, fetcher.probeAll(files.map(\.url)).map { $0.map(store.settled) }) {
            let shown = Redaction.redact(source.url)
            switch ProbeOutcome.judge(result, stored: { store.storedMetadata(for: source.url) },
                                      wasSaved: saved.contains(source.url)) {
            case .directory(let url):
                directories.append(MountSource(url: url, name: source.name))
            case .online(let metadata):
                add(metadata, as: source.name, to: probed.catalog)
                if !source.mirrors.isEmpty || configuration.mirrorsFromLinks {
                    probed.mirrored.append((metadata, source.mirrors))
                }
            case .offline(let stored, let reason):
                add(stored, as: source.name, to: probed.catalog)
                if !source.mirrors.isEmpty { probed.mirrored.append((stored, source.mirrors)) }
                probed.offline[source.url] = reason
                printError("rangefs: \(shown): \(reason); serving what is cached until it answers")
            case .gone(let error), .failed(let error, keepSaved: false):
                probed.unmountable.append(Unmountable(shown: shown, reason: error.userMessage, name: "",
                                                      keepSaved: false, wasSaved: saved.contains(source.url)))
            case .failed(let error, keepSaved: true):
                let name = source.name ?? EntryNaming.preferredName(
                    explicit: nil, metadata: RemoteMetadata(url: source.url, size: 0, etag: "", lastModified: ""))
                probed.unmounted.append(SavedFile(name: name, url: source.url))
                probed.unmountable.append(Unmountable(shown: shown, reason: error.userMessage, name: name,
                                                      keepSaved: true, wasSaved: saved.contains(source.url)))
            }
        }
        if sources.count == 1, let only = directories.first, only.name == nil {
            probed.catalog.setRootURL(only.url)
        } else {
            for directory in directories { probed.catalog.addDirectory(url: directory.url, explicitName: directory.name) }
        }
        return probed
    }

    /// Lists every directory URL before the mount goes ahead, so that one that cannot be listed (404, a server
    /// that is down, an answer that is no listing) is reported like a bad file URL, and taken out of the mount.
    /// One whose server is down but whose listing was kept from an earlier visit mounts from that listing.
    private func listDirectories(of fileSystem: RangeFS, saved: Set<String>, into probed: inout Probed) {
        for (directory, outcome) in fileSystem.listDirectorySources() {
            let url = directory.url ?? ""
            let shown = Redaction.redact(url)
            switch outcome {
            case .listed:
                continue
            case .kept(let reason):
                printError("rangefs: \(shown): \(reason); showing the listing kept from an earlier visit until it answers")
            case .failed(let reason, let gone):
                let name = directory.inode == Catalog.rootInode ? "" : directory.name
                let keepSaved = saved.contains(url) ? !gone : false
                if keepSaved { probed.unmounted.append(SavedFile(name: name, url: url)) }
                probed.unmountable.append(Unmountable(shown: shown, reason: reason, name: name.isEmpty ? shown : name,
                                                      keepSaved: keepSaved, wasSaved: saved.contains(url)))
                if directory.inode == Catalog.rootInode {
                    probed.catalog.setRootURL(nil)
                } else {
                    probed.catalog.removeNode(directory.inode)
                }
            }
        }
    }

    /// Adds a file to `catalog`, in the folders its name gives (`movies/a.mp4`, from a list file), with a warning
    /// if its name had to be cut to 255 bytes.
    private func add(_ metadata: RemoteMetadata, as path: String?, to catalog: Catalog) {
        let parts = path?.split(separator: "/").map(String.init) ?? []
        let name = parts.last ?? path
        let folder = parts.count > 1 ? catalog.folder(Array(parts.dropLast())) : Catalog.rootInode
        let item = catalog.add(metadata, explicitName: name, parent: folder)
        if !metadata.sizeKnown {
            printError("rangefs: \(Redaction.redact(metadata.url)): the server sends no length; \(item.name) reads from "
                       + "start to end and shows its real size once it has been read to its end")
        }
        if let whole = EntryNaming.overlongName(explicit: name, metadata: metadata) {
            printError("rangefs: the name '\(whole.prefix(40))…' is \(whole.utf8.count) bytes, more than a file name "
                       + "can hold (255); it is shortened to '\(item.name.prefix(40))…' (\(item.name.utf8.count) bytes)")
        }
    }

    /// Serves `rangefs status` and friends on the mount's control socket; nil (and a warning) if it cannot.
    private func startControl(for service: ControlService, mountpoint: String, warnings: [String],
                              log: LogDestination, logger: Logger) -> ControlServer? {
        let socketPath = ControlSocket.path(
            forMountpoint: mountpoint,
            in: ControlSocket.directory(environment: ProcessInfo.processInfo.environment, uid: getuid()))
        do {
            return try ControlServer(path: socketPath, logger: logger) { request in
                var response = service.handle(request)
                response.mountpoint = mountpoint
                if request.command == .status {
                    response.warnings = warnings
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
