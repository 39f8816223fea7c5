// `rangefs ui`: a local web page of the mounts' files, block maps and speeds, with their actions one click away.
// It is a process of its own, beside the daemons: it talks to each over its control socket with the same requests
// the CLI sends (UIFeed.swift), so a daemon serves no HTTP and pays nothing while no page is open, and the page
// lives until this command is interrupted. Its token (UIToken.swift) is printed in the URL on stdout and kept in
// `ui-PORT.token` in the folder of the control sockets, both removed at the end.

import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSSystem

/// `rangefs ui [--mount M | --all] [--listen ADDR:PORT]`
struct UICommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ui",
        abstract: "Serve a local web page of a mount's files, block maps and speeds, with pause, pin and evict.",
        discussion: """
        Prints the page's URL, with its token, on stdout, and serves it until interrupted (Ctrl-C). Only a browser \
        that opened that URL can see the page or act; it listens on 127.0.0.1 (a free port) unless told otherwise.
        """
    )

    @Option(name: .long, help: "The mount point of the running mount (default: the only one running).",
            completion: .directory)
    var mount: String?

    @Flag(help: "Every running mount of this user.")
    var all = false

    @Option(name: .long, help: "Where to listen, ADDR:PORT (default: 127.0.0.1 and a free port).")
    var listen: String?

    @Option(name: .long, help: "Give up after this many seconds if a mount does not answer.")
    var timeout = ControlClient.defaultTimeout

    func validate() throws {
        if all && mount != nil { throw ValidationError("pass --mount M or --all, not both") }
        if let listen, Self.address(listen) == nil {
            throw ValidationError("--listen takes ADDR:PORT with an IPv4 address, e.g. 127.0.0.1:8080, not '\(listen)'")
        }
    }

    /// `ADDR:PORT`, `:PORT` or `PORT` (address 127.0.0.1; port 0: any free one).
    static func address(_ text: String) -> (address: String, port: UInt16)? {
        if let parsed = MetricsServer.parse(text) { return (parsed.address, parsed.port) }
        let free = text.hasSuffix(":0") ? String(text.dropLast(2)) : text == "0" ? "" : nil
        guard let free else { return nil }
        let address = free.isEmpty ? "127.0.0.1" : free
        return MetricsServer.parse(address + ":1") == nil ? nil : (address, 0)
    }

    func run() throws {
        try runControl {
            let mounts = all ? try ControlClient.locateAll(timeout: timeout)
                             : [try ControlClient.locate(mount, timeout: timeout, command: "ui")]
            // A named mount that is not running is said now, not as an error on the page.
            _ = try mounts[0].perform(ControlRequest(command: .identify))
            let (address, port) = listen.flatMap(Self.address) ?? ("127.0.0.1", 0)
            let token = try UIToken.random()
            let feed = UIFeed(mounts: mounts, timeout: timeout)
            let server = try UIServer(address: address, port: port, token: token, feed: feed)
            let tokenPath = FileSystemCalls.parentDirectory(of: mounts[0].socketPath) + "/ui-\(server.port).token"
            try token.save(to: tokenPath)
            feed.start()
            // The URL is printed once the first state is in hand, so the page it opens draws at once (asking a
            // mount of 10,000 files for every file takes about a second; the page waited for it).
            _ = feed.event(since: 0, seconds: Int(timeout.rounded(.up)))
            if address != "127.0.0.1" {
                printError("rangefs: warning: the page listens on \(address): plain HTTP, so the token crosses the "
                           + "network unencrypted")
            }
            let served = mounts.map(\.mountpoint).joined(separator: ", ")
            printError("rangefs: serving \(served) until interrupted; the token is in \(tokenPath)")
            print(server.url)
            fflush(nil)
            Self.waitForStop { unlink(tokenPath) }
        }
    }

    /// Blocks until SIGINT, SIGTERM or SIGHUP, then runs `cleanup` and exits 0.
    static func waitForStop(cleanup: @escaping @Sendable () -> Void) -> Never {
        var sources: [DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                cleanup()
                Glibc.exit(0)
            }
            source.resume()
            sources.append(source)
        }
        while true {
            withExtendedLifetime(sources) { _ = pause() }
        }
    }
}
