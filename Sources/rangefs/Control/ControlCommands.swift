import ArgumentParser
import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSFileSystem
import RangeFSPlatform
import RangeFSSystem

/// Runs `body`, printing a CLIError as one line and exiting 1.
func runControl(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as CLIError {
        printError("rangefs: \(error.description)")
        throw ExitCode(1)
    }
}

struct MountSelection: ParsableArguments {
    @Option(name: .long, help: "The mount point of the running mount (default: the only one running).",
            completion: .directory)
    var mount: String?

    @Option(name: .long, help: "Give up after this many seconds if the mount does not answer.")
    var timeout = ControlClient.defaultTimeout

    /// Sends `request` to the selected mount; throws the mount's refusal, or its silence, as a CLIError.
    @discardableResult
    func perform(_ request: ControlRequest) throws -> ControlResponse {
        try ControlClient.locate(mount, timeout: timeout, command: request.command.rawValue).perform(request)
    }
}

/// `rangefs status [MOUNTPOINT] [--json] [--watch]`
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show each file's size, cached share, state, speed, ETA and block map."
    )

    @Argument(help: "The mount point (default: the only mount running).", completion: .directory)
    var mountpoint: String?

    @Flag(help: "Print JSON instead of a table (every file).")
    var json = false

    @Flag(help: "Show every file; by default the table shows the totals and the files that are active, in error or partial.")
    var all = false

    @Flag(help: "Keep printing every second (redrawn in place on a terminal).")
    var watch = false

    @Option(name: .long, help: "The mount point, as the other commands take it.", completion: .directory)
    var mount: String?

    @Option(name: .long, help: "Give up after this many seconds if the mount does not answer.")
    var timeout = ControlClient.defaultTimeout

    func run() throws {
        try runControl {
            let located = try ControlClient.locate(mountpoint ?? mount, timeout: timeout)
            let terminal = isatty(1) == 1
            repeat {
                // Each round has its own deadline.
                let client = ControlClient(socketPath: located.socketPath, mountpoint: located.mountpoint,
                                           deadline: ContinuousClock.now + .milliseconds(Int(timeout * 1000)))
                let response = try client.perform(ControlRequest(command: .status, all: all || json))
                let files = response.files ?? []
                let totals = response.totals ?? StatusTotals()
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    let document = StatusDocument(mountpoint: client.mountpoint, pid: response.pid, files: files,
                                                  totals: ["size": totals.size, "cached_bytes": totals.cachedBytes,
                                                           "files": UInt64(totals.files),
                                                           "bytes_per_second": UInt64(max(0, totals.bytesPerSecond))],
                                                  warnings: response.warnings ?? [],
                                                  recentErrors: response.recentErrors ?? [],
                                                  passthrough: response.passthrough, proxy: response.proxy)
                    print(String(decoding: try encoder.encode(document), as: UTF8.self))
                } else {
                    if watch && terminal { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                    for warning in response.warnings ?? [] { print("warning: \(warning)") }
                    print(StatusTable.render(files, totals: totals, mountpoint: client.mountpoint, all: all,
                                             recentErrors: response.recentErrors ?? [],
                                             passthrough: response.passthrough, proxy: response.proxy))
                }
                fflush(nil)
                if watch { sleep(1) }
            } while watch
        }
    }
}

struct StatusDocument: Encodable {
    var mountpoint: String
    /// The daemon serving the mount, for `kill`, `journalctl _PID=` or /proc.
    var pid: Int32?
    var files: [FileStatus]
    var totals: [String: UInt64]
    var warnings: [String]
    var recentErrors: [LogRecord]
    var passthrough: String?
    var proxy: String?

    enum CodingKeys: String, CodingKey {
        case mountpoint, pid, files, totals, warnings, passthrough, proxy
        case recentErrors = "recent_errors"
    }
}

/// `rangefs add URL [MIRROR...] [sha256=HEX] [--name N]`
struct AddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a URL to a running mount.")

    @Argument(help: "An http(s)://, s3:// or gs:// URL, then any mirrors of the same file (other URLs that serve the same bytes), then optionally its digest as sha256=HEX, then optionally the word archives (an archive shown as a folder of its members, as a list file's line says it).")
    var urls: [String]
    @Option(help: "The file name to use.") var name: String?
    @OptionGroup var selection: MountSelection

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("add needs a URL") }
    }

    func run() throws {
        // One argument may hold the URL, its mirrors and its digest, as a list file's line does; or each its own.
        let source: MountSource
        do {
            source = try MountSource(parsingLine: urls.joined(separator: " "))
        } catch {
            printError("rangefs: \(error.message)")
            throw ExitCode(2)
        }
        try runControl {
            let response = try selection.perform(ControlRequest(command: .add, name: name, url: source.url,
                                                                mirrors: source.mirrors.isEmpty ? nil : source.mirrors,
                                                                checksum: source.checksum,
                                                                archives: source.archives ? true : nil))
            print("added \(response.message ?? Redaction.redact(source.url))")
        }
    }
}

/// `rangefs rm NAME [--keep-data]`
struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm",
                                                    abstract: "Remove a file from a running mount, and its cached data.")

    @Argument(help: "The file's name in the mount.") var name: String
    @Flag(help: "Keep the cached data, so adding the URL again finds it.") var keepData = false
    @OptionGroup var selection: MountSelection

    func run() throws {
        try runControl {
            try selection.perform(ControlRequest(command: .rm, name: name, keepData: keepData))
        }
    }
}

/// The files `pause` and `resume` apply to: one by name, or `--all`; and the mount.
struct FileSelection: ParsableArguments {
    @Argument(help: "The file's name in the mount.") var name: String?
    @Flag(help: "Every file.") var all = false
    @OptionGroup var selection: MountSelection

    mutating func validate() throws {
        if (name == nil) == !all { throw ValidationError("name one file, or pass --all") }
    }

    /// Sends `command` for the selected files and prints `verb` and their names.
    func send(_ command: ControlRequest.Command, verb: String) throws {
        try runControl {
            let request = ControlRequest(command: command, name: name, all: all)
            let response = try selection.perform(request)
            print("\(verb) \(response.message ?? "")")
        }
    }
}

/// `rangefs pause NAME|--all`
struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause",
                                                    abstract: "Stop downloading a file (or all) in the background; reads still work.")
    @OptionGroup var files: FileSelection

    func run() throws { try files.send(.pause, verb: "paused") }
}

/// `rangefs resume NAME|--all`
struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume",
                                                    abstract: "Continue downloading a paused file (or all) where it stopped.")
    @OptionGroup var files: FileSelection

    func run() throws { try files.send(.resume, verb: "resumed") }
}

/// `rangefs pin NAME`
struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pin",
                                                    abstract: "Download a file completely now, and never evict it.")
    @Argument(help: "The file's name in the mount.") var name: String
    @OptionGroup var selection: MountSelection

    func run() throws {
        try runControl { try selection.perform(ControlRequest(command: .pin, name: name)) }
    }
}

/// `rangefs evict NAME`
struct EvictCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "evict",
                                                    abstract: "Delete a closed, unpinned file's cached data (it stays mounted).")
    @Argument(help: "The file's name in the mount.") var name: String
    @OptionGroup var selection: MountSelection

    func run() throws {
        try runControl { try selection.perform(ControlRequest(command: .evict, name: name)) }
    }
}

/// Plain-text status: the totals, one line per file in path order, and the mount's recent errors; no escape codes.
enum StatusTable {
    /// The widest a name column gets; longer names are cut in the middle, where paths that differ rarely do.
    static let nameWidth = 60

    /// With `all`, the files left out are only the untouched ones of listings (RangeFS+Status.swift), and
    /// the last line says so instead of pointing at `--all`.
    static func render(_ files: [FileStatus], totals: StatusTotals, mountpoint: String, all: Bool = false,
                       recentErrors: [LogRecord] = [], passthrough: String? = nil, proxy: String? = nil) -> String {
        var lines = ["\(mountpoint)"]
        lines.append("total: \(totals.files) files, \(bytes(totals.cachedBytes)) of \(bytes(totals.size)) local"
                     + (totals.bytesPerSecond > 0 ? ", \(bytes(UInt64(totals.bytesPerSecond)))/s" : ""))
        if let passthrough { lines.append("passthrough: \(passthrough)") }
        if let proxy { lines.append("proxies: \(proxy)") }
        let width = min(nameWidth, max(4, files.map(\.name.count).max() ?? 4))
        if !files.isEmpty {
            lines.append(pad("NAME", width) + "  " + pad("SIZE", 9) + "  " + pad("LOCAL", 6) + "  " + pad("STATE", 11)
                         + "  " + pad("SPEED", 11) + "  " + pad("ETA", 8) + "  MAP")
        }
        for file in files.sorted(by: { $0.name < $1.name }) {
            let share = file.size == 0 ? 100 : Double(file.cachedBytes) * 100 / Double(file.size)
            let unmounted = ["unmounted", "not listed"].contains(file.state) || file.name.hasSuffix("/")  // no size
            // A file whose server sends no length: the size is what has come so far, and no share of a whole.
            let unsized = file.state == "streaming" || file.state == "unsized"
            lines.append(pad(shorten(file.name, to: width), width) + "  "
                         + pad(unmounted ? "-" : bytes(file.size), 9) + "  "
                         + pad(unmounted || unsized ? "-" : cFormat("%.1f%%", share), 6) + "  "
                         + pad(file.state, 11) + "  "
                         + pad(file.bytesPerSecond > 0 ? bytes(UInt64(file.bytesPerSecond)) + "/s" : "-", 11) + "  "
                         + pad(file.etaSeconds.map(duration) ?? "-", 8) + "  [" + file.map + "]" + (file.pinned ? " pinned" : "")
                         + (file.passthroughHandles > 0 ? " passthrough" : ""))
            if let error = file.lastError, ["error", "offline", "unmounted", "listed in part"].contains(file.state) {
                lines.append("    last error: \(error)")
            }
            if let note = file.note { lines.append("    note: \(note)") }
            for mirror in file.mirrors ?? [] { lines.append("    mirror \(mirror)") }
            if let digest = file.digest { lines.append("    digest: \(digest)") }
        }
        let hidden = totals.files - files.filter { !$0.name.hasSuffix("/") }.count
        if hidden > 0 {
            lines.append(all ? "(\(hidden) files of listings not shown: none of their bytes is cached yet)"
                             : "(\(hidden) complete or untouched files not shown; rangefs status --all shows them)")
        }
        if !recentErrors.isEmpty {
            lines.append("recent errors and warnings (the newest last):")
            for record in recentErrors { lines.append("  \(record.time) \(record.level): \(record.message)") }
        }
        return lines.joined(separator: "\n")
    }

    /// `name` in at most `width` characters: cut in the middle with an ellipsis, keeping more of the end (the
    /// file name and its extension) than of the start.
    static func shorten(_ name: String, to width: Int) -> String {
        guard name.count > width, width > 2 else { return name }
        let head = (width - 1) * 2 / 5
        return name.prefix(head) + "…" + name.suffix(width - 1 - head)
    }

    static func bytes(_ value: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var amount = Double(value), unit = 0
        while amount >= 1024 && unit < units.count - 1 { amount /= 1024; unit += 1 }
        return unit == 0 ? "\(value) B" : cFormat("%.1f ", amount) + units[unit]
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 3600 ? "\(total / 3600)h\(total % 3600 / 60)m" : total >= 60 ? "\(total / 60)m\(total % 60)s" : "\(total)s"
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
