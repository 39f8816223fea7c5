import ArgumentParser
import CLinux
import FoundationEssentials

/// `rangefs`: mount HTTP(S) URLs as files.
@main
struct RangefsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rangefs",
        abstract: "Mount HTTP(S) URLs as local files, fetched on demand into a persistent block cache.",
        discussion: """
        Exit status: 0 mounted, 1 nothing mounted, 2 mounted but some URLs failed, 64 bad arguments.
        The fstab shape `rangefs SOURCE DIR -o cache=DIR,...` is also accepted (SOURCE: a URL or a list file).
        """,
        version: rangefsVersion,
        subcommands: [MountCommand.self, UnmountCommand.self, StatusCommand.self, AddCommand.self, RemoveCommand.self,
                      PauseCommand.self, ResumeCommand.self, PinCommand.self, EvictCommand.self, VerifyCommand.self,
                      UICommand.self, FstabMountCommand.self],
        defaultSubcommand: FstabMountCommand.self
    )

    /// Runs the command `arguments` (without argv[0]) name, after rewriting `-o` lists into long options.
    static func main() {
        // Started as /proc/self/exe (the background child), the process would be called "exe": `pgrep -x rangefs`
        // and `ps` must find it by its name.
        _ = rfs_set_process_name("rangefs")
        do {
            // A background child takes its arguments from its parent's pipe: its own argv has the secrets masked.
            let isChild = ProcessInfo.processInfo.environment[daemonChildVariable] == "1"
            let arguments = (isChild ? Daemon.receiveArguments() : nil) ?? Array(CommandLine.arguments.dropFirst())
            // A foreground mount is the daemon itself: `ps` shows its URLs without their secrets too.
            if !isChild { OwnCommandLine.maskSecrets() }
            var command = try parseCommandLine(arguments)
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// Parses a command line as `main` does: `-o` lists first become the long options they stand for.
    static func parseCommandLine(_ arguments: [String]) throws -> ParsableCommand {
        try parseAsRoot(try MountOptionList.expand(arguments))
    }
}
