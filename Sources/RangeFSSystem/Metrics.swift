// What the daemon did, as counters for the people who run many machines (`--metrics ADDR:PORT` serves them as
// Prometheus text; `rangefs status` stays the view of one mount). One registry per process, as Prometheus client
// libraries have it: a mount is one process. The mount (MountRunner) makes the one registry and hands it to the
// store, the scheduler and the file system at their birth; nothing reaches it as a global. Labels are bounded: sources are origins (scheme, host, port), never
// whole URLs, so a library of 100,000 files from one server is one series.

import Synchronization

/// Counters, each a name and a set of labels; only ever added to.
package final class Metrics: Sendable {
    /// An empty registry: one per mount.
    package init() {}

    /// One series: a counter's name and its labels, sorted and formatted.
    private struct Series: Hashable, Sendable {
        let name: String
        let labels: [String]

        init(_ name: String, labels: KeyValuePairs<String, String> = [:]) {
            self.name = name
            self.labels = labels.map { "\($0.key)=\"\(Metrics.escape($0.value))\"" }.sorted()
        }
    }

    private let counters = LockedBox<[Series: UInt64]>([:])
    /// The counters of every READ, kept apart in atomics: no lock on the read path. Bytes and READs, hit and miss.
    private let hitBytes = Atomic<UInt64>(0)
    private let missBytes = Atomic<UInt64>(0)
    private let hits = Atomic<UInt64>(0)
    private let misses = Atomic<UInt64>(0)

    /// Counts one READ of `bytes`: a hit when every block was local.
    package func countRead(bytes: Int, hit: Bool) {
        if hit {
            hitBytes.add(UInt64(bytes), ordering: .relaxed)
            hits.add(1, ordering: .relaxed)
        } else {
            missBytes.add(UInt64(bytes), ordering: .relaxed)
            misses.add(1, ordering: .relaxed)
        }
    }

    /// What each counter means, for its `# HELP` line; every counter added is named here.
    static let help: [String: String] = [
        "rangefs_fetched_bytes_total": "Body bytes received for the cache, by source (origin or mirror, as scheme://host:port) and role.",
        "rangefs_proxy_bytes_total": "Body bytes received for the cache through each proxy of --proxy.",
        "rangefs_fetch_errors_total": "Failed transfer attempts, by kind.",
        "rangefs_read_bytes_total": "Bytes read through the daemon: hit when every block was local, miss when a block had to be fetched.",
        "rangefs_reads_total": "READ requests answered by the daemon, hit or miss as for rangefs_read_bytes_total.",
        "rangefs_evicted_bytes_total": "Bytes dropped from the cache to stay under --cache-max-size.",
        "rangefs_passthrough_opens_total": "Opens of complete files that the kernel reads itself (FUSE passthrough).",
        "rangefs_io_errors_total": "Errors answered to programs as EIO (network trouble after retries, a failed server, a broken cache file); each distinct message is logged once.",
        "rangefs_digest_checks_total": "End-to-end digest checks of complete files, by result: verified, refetch (a first mismatch, the file is fetched again) or mismatch (wrong again after the refetch).",
    ]

    /// Counters without labels: shown as 0 before anything was added, so that a dashboard finds them.
    static let unlabeled: Set<String> = ["rangefs_evicted_bytes_total", "rangefs_passthrough_opens_total",
                                         "rangefs_io_errors_total"]

    package func add(_ name: String, _ value: UInt64 = 1, labels: KeyValuePairs<String, String> = [:]) {
        guard value > 0 else { return }
        let series = Series(name, labels: labels)
        counters.withLock { $0[series, default: 0] &+= value }
    }

    /// The value of one series, 0 if it was never added to.
    func value(_ name: String, labels: KeyValuePairs<String, String> = [:]) -> UInt64 {
        let series = Series(name, labels: labels)
        return snapshot[series] ?? 0
    }

    /// Every series with its value, the read counters included.
    private var snapshot: [Series: UInt64] {
        var all = counters.withLock { $0 }
        let reads: [(String, String, UInt64)] = [
            ("rangefs_read_bytes_total", "hit", hitBytes.load(ordering: .relaxed)),
            ("rangefs_read_bytes_total", "miss", missBytes.load(ordering: .relaxed)),
            ("rangefs_reads_total", "hit", hits.load(ordering: .relaxed)),
            ("rangefs_reads_total", "miss", misses.load(ordering: .relaxed)),
        ]
        for (name, result, value) in reads where value > 0 { all[Series(name, labels: ["result": result])] = value }
        return all
    }

    /// The Prometheus text exposition format (version 0.0.4): HELP and TYPE once per name, then its series.
    package var prometheusText: String {
        let snapshot = self.snapshot
        var text = ""
        for name in Self.help.keys.sorted() {
            text += "# HELP \(name) \(Self.help[name]!)\n# TYPE \(name) counter\n"
            let series = snapshot.filter { $0.key.name == name }.sorted { $0.key.labels.lexicographicallyPrecedes($1.key.labels) }
            if series.isEmpty && Self.unlabeled.contains(name) { text += "\(name) 0\n" }
            for (key, value) in series {
                text += name + (key.labels.isEmpty ? "" : "{" + key.labels.joined(separator: ",") + "}") + " \(value)\n"
            }
        }
        return text
    }

    /// A label value as the format writes it: backslash, double quote and line feed escaped.
    /// Most values need none, and are seen with no copy: every transfer counts its bytes under a label.
    fileprivate static func escape(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == 0x0A })
        else { return value }
        return value.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"")
            .replacing("\n", with: "\\n")
    }
}
