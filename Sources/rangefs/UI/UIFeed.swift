// What the web page shows, kept up to date by asking the mounts over their control sockets: the same `status` the
// CLI sends, so the page can show nothing `rangefs status` would not (its URLs and errors come redacted by the
// daemon). The feed asks only while a page is watching: once a second per mount it asks for the files worth a look
// (those whose cache entry is open: the daemon finds them without looking at the others), and for every file only
// every `fullInterval` ticks, at the start, after an action, and when a transferring file left that short list;
// so a mount of 10,000 files describes 10,000 files once every ten seconds, not every second. Between full
// answers the mount's sums are the page's own files' (a file whose entry is closed does not change).
//
// Each change bumps a generation; each file remembers the generation that last changed it, so an event stream
// sends a page only the files that changed since its last event, and every file only when the set of files
// changed (a file added or removed) or it has just connected.

import FoundationEssentials
import Glibc
import RangeFSControl
import RangeFSFileSystem
import RangeFSPlatform

/// One file as the page shows it.
/// More than 12 stored properties: a record, one field per value the page shows of a file, encoded as JSON.
struct UIFile: Encodable, Equatable {
    var mount: Int
    var name: String
    var url: String
    var size: UInt64
    var cached: UInt64
    var state: String
    var speed: Double
    var eta: Double?
    /// status's squeezed map: ' ' none, '.' some, ':' most, '#' all.
    var map: String
    var error: String?
    var pinned: Bool
    var mirrors: [String]
    var digest: String?
    var note: String?

    init(mount: Int, _ status: FileStatus) {
        self.mount = mount
        name = status.name
        url = status.url
        size = status.size
        cached = status.cachedBytes
        state = status.state
        speed = status.bytesPerSecond
        eta = status.etaSeconds
        map = status.map
        error = status.lastError
        pinned = status.pinned
        mirrors = (status.mirrors ?? []).map(\.description)
        digest = status.digest
        note = status.note
    }
}

/// One mount's totals as the page shows them.
struct UIMount: Encodable, Equatable {
    var index: Int
    var mountpoint: String
    var files = 0
    var size: UInt64 = 0
    var cached: UInt64 = 0
    var speed = 0.0
    /// Files in error.
    var errors = 0
    /// Why the mount cannot be asked (its daemon is gone, say), or nil.
    var problem: String?
    var warnings: [String] = []
    /// The mount's last warnings and errors, `TIME LEVEL: MESSAGE`.
    var recent: [String] = []
}

/// One server-sent event: the mounts, and the files that changed (all of them when `full`).
struct UIEvent: Encodable {
    var generation: Int
    var full: Bool
    var mounts: [UIMount]
    var files: [UIFile]
}

/// Polls the mounts while a page watches, and hands each event stream what changed.
final class UIFeed: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is read and written with `condition`'s lock held.
    let mounts: [ControlClient]
    private let timeout: Double
    private let condition = Condition()
    private var generation = 0
    /// The generation that last added or removed a file.
    private var setGeneration = 0
    private var files: [String: (file: UIFile, changed: Int)] = [:]
    private var mountTotals: [UIMount]
    /// Each mount's sums in its last full answer, and the sums of the files that answer showed.
    private var fullSums: [(size: UInt64, cached: UInt64, shownSize: UInt64, shownCached: UInt64)]
    /// When a page last asked; polling stops a few seconds after the last page went away.
    private var lastDemand = ContinuousClock.now - .seconds(3600)
    private var refreshRequested = true

    /// Every file is asked for once in this many ticks of a second (and whenever the short list shrinks).
    static let fullInterval = 10
    /// How long polling goes on after the last page stopped watching.
    static let idleAfter = Duration.seconds(5)

    init(mounts: [ControlClient], timeout: Double) {
        self.mounts = mounts
        self.timeout = timeout
        mountTotals = mounts.enumerated().map { UIMount(index: $0.offset, mountpoint: $0.element.mountpoint) }
        fullSums = Array(repeating: (0, 0, 0, 0), count: mounts.count)
    }

    /// A client for mount `index` with a fresh deadline.
    func client(_ index: Int) -> ControlClient? {
        guard mounts.indices.contains(index) else { return nil }
        return ControlClient(socketPath: mounts[index].socketPath, mountpoint: mounts[index].mountpoint,
                             deadline: ContinuousClock.now + .milliseconds(Int(timeout * 1000)))
    }

    /// Starts the polling thread.
    func start() {
        startThread(name: "rangefs-ui-feed") { [self] in
            var tick = 0
            var fullNeeded = Array(repeating: true, count: mounts.count)
            while true {
                condition.withLock {
                    while !refreshRequested && ContinuousClock.now - lastDemand > Self.idleAfter {
                        _ = condition.wait(until: Condition.deadline(after: 1))
                    }
                    if refreshRequested { fullNeeded = fullNeeded.map { _ in true } }
                    refreshRequested = false
                }
                for index in mounts.indices {
                    let full = fullNeeded[index] || tick % Self.fullInterval == 0
                    fullNeeded[index] = poll(index, full: full)
                }
                tick += 1
                condition.withLock {
                    generation += 1
                    condition.broadcast()
                    // A second, whatever wakes the condition meanwhile (each event stream does), unless an action
                    // asks for a refresh.
                    let next = Condition.deadline(after: 1)
                    while !refreshRequested && condition.wait(until: next) {}
                }
            }
        }
    }

    /// Asks mount `index` for its status and takes it in; returns whether the next tick must ask for every file.
    private func poll(_ index: Int, full: Bool) -> Bool {
        let response: ControlResponse
        do {
            guard let client = client(index) else { return false }
            response = try client.perform(full ? ControlRequest(command: .status, all: true)
                                                 : ControlRequest(command: .status, active: true))
        } catch {
            condition.withLock { mountTotals[index].problem = "\(error)" }
            return true
        }
        let fresh = (response.files ?? []).filter { !$0.name.hasSuffix("/") }.map { UIFile(mount: index, $0) }
        return condition.withLock { () -> Bool in
            let next = generation + 1
            var totals = mountTotals[index]
            totals.problem = nil
            if full {
                totals.files = response.totals?.files ?? fresh.count
                totals.warnings = response.warnings ?? []
                totals.recent = (response.recentErrors ?? []).suffix(5).map { "\($0.time) \($0.level): \($0.message)" }
            }
            var seen = Set<String>()
            for file in fresh {
                let key = Self.key(index, file.name)
                seen.insert(key)
                if let old = files[key], old.file == file { continue }
                if files[key] == nil { setGeneration = next }
                files[key] = (file, next)
            }
            var shrank = false
            for (key, old) in files where old.file.mount == index && !seen.contains(key) {
                if full {
                    files[key] = nil
                    setGeneration = next
                } else if old.file.speed > 0 || ["downloading", "queued"].contains(old.file.state) {
                    shrank = true  // its entry closed (or it was removed) mid-transfer: the next tick tells
                }
            }
            // Between full answers the sums move with the files shown: every file that can change is in the short
            // list. The full answer's sums also count what it leaves out (a listing's untouched files).
            let mine = files.values.lazy.filter { $0.file.mount == index }.map(\.file)
            let (size, cached, speed, errors) = mine.reduce((UInt64(0), UInt64(0), 0.0, 0)) {
                ($0.0 + $1.size, $0.1 + $1.cached, $0.2 + $1.speed, $0.3 + ($1.state == "error" ? 1 : 0))
            }
            if full {
                fullSums[index] = (response.totals?.size ?? size, response.totals?.cachedBytes ?? cached, size, cached)
            }
            let base = fullSums[index]
            totals.size = base.size &+ size &- base.shownSize
            totals.cached = base.cached &+ cached &- base.shownCached
            (totals.speed, totals.errors) = (speed, errors)
            mountTotals[index] = totals
            return shrank
        }
    }

    private static func key(_ mount: Int, _ name: String) -> String { "\(mount)/\(name)" }

    /// Asks for every file at once (after an action), instead of at the next full tick.
    func refresh() {
        condition.withLock {
            refreshRequested = true
            condition.broadcast()
        }
    }

    /// Waits until there is a generation newer than `since` (or `seconds` pass) and returns the event for it:
    /// every file if `since` is 0 or the set of files changed, else those that changed. nil on timeout.
    func event(since: Int, seconds: Int) -> UIEvent? {
        condition.withLock { () -> UIEvent? in
            lastDemand = ContinuousClock.now
            let deadline = Condition.deadline(after: seconds)
            while generation <= since || generation == 0 {
                condition.broadcast()  // wakes the feed if it slept for want of a page
                guard condition.wait(until: deadline) else { return nil }
                lastDemand = ContinuousClock.now
            }
            let full = since == 0 || setGeneration > since
            let changed = files.values.filter { full || $0.changed > since }.map(\.file)
                .sorted { ($0.mount, $0.name) < ($1.mount, $1.name) }
            return UIEvent(generation: generation, full: full, mounts: mountTotals, files: changed)
        }
    }
}
