import ArgumentParser
import Foundation
import RangeFSCore
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

    @Argument(help: "An existing, empty directory to mount on.")
    var mountpoint: String

    @Argument(help: "http:// or https:// URLs, each optionally as NAME=URL.")
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

    @Argument(help: "A URL, or a list file with one URL per line.")
    var source: String

    @Argument(help: "The directory to mount on.")
    var mountpoint: String

    @OptionGroup var options: MountOptions

    func run() throws {
        var configuration = MountConfiguration(options)
        let urls = source.contains("://") ? [source] : []
        if urls.isEmpty { configuration.listFiles.append(source) }
        throw ExitCode(MountRunner(mountpoint: mountpoint, urls: urls, configuration: configuration).run())
    }
}

/// `rangefs unmount MOUNTPOINT`
struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a rangefs mount; the daemon then commits its cache and exits.",
        aliases: ["umount"]
    )

    @Argument(help: "The mount point.")
    var mountpoint: String

    @Flag(name: [.short, .long], help: "Detach even if files are open (fusermount3 -uz).")
    var lazy = false

    func run() throws {
        let result = try Subprocess.run("/bin/fusermount3", [lazy ? "-uz" : "-u", mountpoint], timeout: 60)
        if result.status != 0 {
            let message = result.errorText
            let reason = message.contains("busy") ? "it is busy; close the programs using it or add --lazy"
                : message.trimmingCharacters(in: .whitespacesAndNewlines)
            printError("rangefs: cannot unmount \(mountpoint): \(reason)")
            throw ExitCode(1)
        }
    }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}
