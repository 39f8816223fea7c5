import ArgumentParser
import FoundationEssentials
import Logging
import RangeFSCache
import RangeFSControl
import RangeFSSystem

/// `rangefs verify [URL...]`: check the cached blocks against their CRCs.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check cached blocks against their CRC32C: a file of a running mount, or a whole cache (--cache).",
        discussion: """
        rangefs verify NAME [--mount MOUNTPOINT]: check one file of a running mount; damaged blocks are dropped
        and fetched again on their next read.
        rangefs verify --cache DIR [--repair] [URL...]: check a cache that is not mounted.
        Exit status: 0 all blocks good, 1 damage found, 3 the cache is in use or missing.
        """
    )

    @Option(name: .long, help: "Cache directory (default: $XDG_CACHE_HOME/rangefs or ~/.cache/rangefs).",
            completion: .directory)
    var cache: String?

    @Flag(name: .long, help: "Drop the blocks that fail, so they are fetched again on their next read.")
    var repair = false

    @Argument(help: "With --cache: only the entries of these URLs (default: every entry). Else: one file's name.")
    var urls: [String] = []

    @Option(name: .long, help: "The mount point of the running mount (default: the only one running).",
            completion: .directory)
    var mount: String?

    @Option(name: .long, help: "Give up after this many seconds if the mount does not answer.")
    var timeout = ControlClient.defaultTimeout

    func run() throws {
        // No running mount to ask: the cache is verified offline below, which says what it checked.
        if cache == nil, let name = urls.first, urls.count == 1,
           let client = try? ControlClient.locate(mount, timeout: timeout) {  // (see above)
            let response: ControlResponse
            do {
                response = try client.send(ControlRequest(command: .verify, name: name))
            } catch let error as ControlClient.Unresponsive {
                printError("rangefs: \(error.description)")
                throw ExitCode(1)
            }
            print(response.message ?? response.error ?? "")
            if !response.ok { throw ExitCode(1) }
            return
        }
        let root = cache ?? CacheStore.defaultRoot(environment: ProcessInfo.processInfo.environment)
        guard FileManager.default.fileExists(atPath: root + "/entries") else {
            printError("rangefs: no cache at \(root); pass --cache DIR")
            throw ExitCode(3)
        }
        let store: CacheStore
        do {
            store = try CacheStore(root: root, logger: Logger(label: "rangefs"))
        } catch {
            printError("rangefs: \(error)")
            throw ExitCode(3)
        }
        let folders = urls.isEmpty ? store.entryFolders() : urls.map(store.entryPath(for:))
        var damaged = 0
        for folder in folders {
            let report = store.verify(folder: folder, repair: repair)
            print(report.line)
            if !report.isHealthy { damaged += 1 }
        }
        if damaged > 0 { throw ExitCode(1) }
    }
}
