import ArgumentParser
import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSPlatform
import RangeFSProcess

/// `rangefs mount MOUNTPOINT URL...`
struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount URLs (and the URLs of list files) as read-only files in MOUNTPOINT.",
        discussion: """
        -o OPT[,OPT=VALUE...]: any option below written as a mount option, with _ for - (cache=DIR,block_size=64K,
        allow_other, ...). The generic mount options (_netdev, nofail, auto, user, rw, ro, defaults, x-*, ...) are
        accepted and ignored.
        """
    )

    @Argument(help: "An existing, empty directory to mount on.", completion: .directory)
    var mountpoint: String

    @Argument(help: "URLs, each optionally as NAME=URL: http(s)://HOST/FILE, a web directory http(s)://HOST/DIR/ (its listing), s3://BUCKET/KEY or s3://BUCKET/PREFIX/ (see --s3-*), gs://BUCKET/PREFIX/.")
    var urls: [String] = []

    @OptionGroup var options: MountOptions

    // No URLs is fine when the cache has files saved from an earlier mount; the daemon says so if not.

    func run() throws {
        let runner = MountRunner(mountpoint: mountpoint, urls: urls, configuration: MountConfiguration(options))
        throw ExitCode(runner.run())
    }
}

/// The fstab shape `rangefs SOURCE DIR -o opts`, as mount(8) calls helpers; SOURCE is a URL or a list file.
struct FstabMountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fstab-mount",
        abstract: "Mount in the shape mount(8) uses: rangefs SOURCE DIR -o cache=DIR,...",
        shouldDisplay: false
    )

    @Argument(help: "A URL, or a list file with one URL per line.", completion: .file())
    var source: String

    @Argument(help: "The directory to mount on.", completion: .directory)
    var mountpoint: String

    @OptionGroup var options: MountOptions

    func run() throws {
        var configuration = MountConfiguration(options)
        let urls = source.contains("://") ? [source] : []
        if urls.isEmpty { configuration.listFiles.append(source) }
        throw ExitCode(MountRunner(mountpoint: mountpoint, urls: urls, configuration: configuration).run())
    }
}

/// `rangefs unmount MOUNTPOINT`: unmounts, then waits until the daemon has committed its cache and exited, so
/// that a mount of the same cache, or removing it, can follow at once.
struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a rangefs mount, and return once its daemon has committed its cache and exited.",
        aliases: ["umount"]
    )

    @Argument(help: "The mount point.", completion: .directory)
    var mountpoint: String

    @Flag(name: [.short, .long], help: "Detach even if files are open (fusermount3 -uz).")
    var lazy = false

    @Option(name: .long, help: "Seconds to wait for the daemon to exit after the unmount.")
    var wait = 60

    func run() throws {
        let target = MountPoint.absolute(mountpoint)
        // Asked before unmounting: afterwards the daemon no longer answers.
        let daemon = try? ControlClient.locate(target, timeout: 5).send(ControlRequest(command: .identify)).pid
        if daemon != nil { UnmountReport.clear(mountpoint: target) }
        let result = try Subprocess.run("/bin/fusermount3", [lazy ? "-uz" : "-u", mountpoint], timeout: 60)
        if result.status != 0 {
            let message = result.errorText
            let reason = message.contains("busy") ? "it is busy; close the programs using it or add --lazy"
                : MountPoint.unmountFailure(target, fusermount: message)
            printError("rangefs: cannot unmount \(mountpoint): \(reason)")
            throw ExitCode(1)
        }
        guard let daemon, daemon > 0 else {
            print("unmounted \(target)")
            return
        }
        guard Self.waitForExit(of: daemon, seconds: Double(wait)) else {
            printError("rangefs: \(target) is unmounted, but its daemon (pid \(daemon)) is still running after "
                       + "\(wait) s; its cache stays locked until it exits (see its log)")
            throw ExitCode(1)
        }
        // The daemon's own report: "committed" only if it did.
        guard let report = UnmountReport.take(mountpoint: target) else {
            printError("rangefs: unmounted \(target); its daemon (pid \(daemon)) exited without saying whether it "
                       + "committed the cache (it may have crashed); see its log")
            throw ExitCode(1)
        }
        guard report.committed else {
            printError("rangefs: unmounted \(target), but its cache did not keep everything: "
                       + (report.notKept ?? "see its log"))
            throw ExitCode(1)
        }
        print("unmounted \(target); its daemon committed the cache and exited")
    }

    /// Waits until process `pid` has exited (or is a zombie: it ran to its end); false after `seconds`.
    static func waitForExit(of pid: Int32, seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if kill(pid, 0) != 0 && errno == ESRCH { return true }
            // No stat file: the process is gone already, which kill(2) above tells on the next turn.
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
               let state = stat.split(separator: ")").last?.split(separator: " ").first, state == "Z" {
                return true
            }
            usleep(10_000)
        }
        return false
    }
}

/// Writes `message` and a newline to standard error, whole (a write interrupted by a signal goes on).
func printError(_ message: String) {
    var bytes = Array((message + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        bytes = bytes.dropFirst(written)
    }
}
