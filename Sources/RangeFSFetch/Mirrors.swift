// One file, several URLs: the file's own (the primary, whose size and validators its cache entry records) and its
// mirrors. Each request of a mirrored file asks the mirror that should finish it first: the one with the best
// measured speed per running request, so load follows speed; a mirror not measured yet is tried first. A mirror
// that fails, or stalls (sends nothing for `FetchPolicy.mirrorStallTime` while another mirror could take over), is
// set aside with a backoff (2 s, doubling to 60 s) and the request goes on at once, from the byte where it broke,
// on another; back from its backoff it gets one request until one succeeds, so a mirror that is still dead costs
// one request, not its share. One that disagrees on the length, or ignores Range, is dropped for this file.
// Only when every mirror is set aside does a request wait, and it fails only after the retry policy's attempts.
//
// Each mirror keeps its own validator (from its probe or its first 206) for its own If-Range: mirrors of one
// file have different ETags, and a 200 to a mirror's If-Range says that mirror changed, not the file. When the
// file itself changes (its primary's version), its mirrors are registered and probed afresh.
//
// Which mirror served each block is remembered (in memory). When the complete file fails its digest check, the
// refetch asks each block of another mirror than the one that served it before (`beginRefetch`): requests are cut
// where the earlier source changes, and each avoids its blocks' earlier source. So one mirror that served other
// bytes of the same length cannot spoil the refetch too.

import RangeFSSystem

/// The URLs of one file and how each has done; shared by every transfer of the file.
package final class MirrorSet: Sendable {
    /// A mirror's condition.
    package enum Condition: Equatable {
        case usable
        /// Failed lately; not asked until `until` (seconds on the monotonic clock) unless nothing else is left.
        case setAside(until: Double)
        /// Disagrees with the file (length, Range): never asked again for this file.
        case dropped

        /// Whether a request may ask it at `now`: usable, or set aside until no later than `now`.
        package func isUsable(at now: Double) -> Bool {
            switch self {
            case .usable: true
            case .setAside(let until): until <= now
            case .dropped: false
            }
        }
    }

    package struct Mirror {
        package let url: String
        /// What this mirror sends as its validator (strong ETag, else Last-Modified); nil until known, or for
        /// the primary, whose validator is the cache entry's.
        var validator: String?
        package var condition = Condition.usable
        /// Bytes per second of one request, smoothed over the last requests; nil until measured.
        package var speed: Double?
        /// Body bytes stored from this mirror.
        package var bytes: UInt64 = 0
        /// Requests running on it now.
        var running = 0
        /// Failures since its last success, for the backoff.
        var failures = 0
        package var lastError: String?
    }

    /// Which mirror a request asks, and with what If-Range.
    struct Choice: Equatable {
        let index: Int
        let url: String
        /// For the primary, nil here: the entry's validator is used.
        let validator: String?
        var isPrimary: Bool { index == 0 }
    }

    static let firstBackoff = 2.0
    static let longestBackoff = 60.0
    /// A request shorter than this says little about a mirror's speed.
    static let measuredBytes: UInt64 = 256 << 10

    private let mirrors: LockedBox<[Mirror]>
    private let clock: @Sendable () -> Double

    /// The mirror (index + 1; 0 for unknown) that served each block, and during a refetch what served it before.
    private struct BlockSources {
        var served: [UInt8] = []
        var earlier: [UInt8]?
    }
    private let sources = LockedBox(BlockSources())

    /// `urls[0]` is the primary.
    init(urls: [String], clock: @escaping @Sendable () -> Double = MonotonicClock.seconds) {
        var seen = Set<String>()
        mirrors = LockedBox(urls.filter { seen.insert($0).inserted }.map { Mirror(url: $0) })
        self.clock = clock
    }

    package var urls: [String] { mirrors.withLock { $0.map(\.url) } }
    package var snapshot: [Mirror] { mirrors.withLock { $0 } }

    /// The mirror the next request should ask, counted as running there until `finished`. Among the usable ones,
    /// the one with the most speed per request it would run; when every one is set aside, the one whose backoff
    /// ends first (the request was going to wait anyway).
    /// A request of blocks that a refetch wants from other mirrors than before passes their earlier sources as
    /// `avoiding`; they are asked only when no other mirror is usable.
    func choose(avoiding: Set<Int> = []) -> Choice {
        let now = clock()
        return mirrors.withLock { mirrors in
            for index in mirrors.indices where mirrors[index].condition.isUsable(at: now) {
                mirrors[index].condition = .usable  // a backoff that ended
            }
            let fastest = mirrors.compactMap(\.speed).max() ?? 1
            let others = mirrors.indices.contains { mirrors[$0].condition == .usable && !avoiding.contains($0) }
            var best: (index: Int, score: Double)?
            for (index, mirror) in mirrors.enumerated()
            where mirror.condition == .usable && !(others && avoiding.contains(index))
                // Back from a backoff, a mirror gets one request to show it works before it gets its share.
                && !(mirror.failures > 0 && mirror.running > 0) {
                // Unmeasured mirrors count as a little faster than the fastest, so each is tried early.
                let score = (mirror.speed ?? fastest * 1.01) / Double(mirror.running + 1)
                if best == nil || score > best!.score { best = (index, score) }
            }
            let index = best?.index ?? mirrors.indices.filter { mirrors[$0].condition != .dropped }.min {
                Self.until(mirrors[$0].condition) < Self.until(mirrors[$1].condition)
            } ?? 0
            mirrors[index].running += 1
            return Choice(index: index, url: mirrors[index].url, validator: mirrors[index].validator)
        }
    }

    private static func until(_ condition: Condition) -> Double {
        if case .setAside(let until) = condition { return until }
        return 0
    }

    /// Whether a request that just failed on `choice` can go on at once elsewhere.
    var hasUsableMirror: Bool {
        let now = clock()
        return mirrors.withLock { mirrors in mirrors.contains { $0.condition.isUsable(at: now) } }
    }

    /// Whether a mirror other than `index` could take a request now.
    func hasUsableMirror(besides index: Int) -> Bool {
        let now = clock()
        return mirrors.withLock { mirrors in
            mirrors.indices.contains { $0 != index && mirrors[$0].condition.isUsable(at: now) }
        }
    }

    /// A request on `choice` ended having stored `bytes` in `seconds`, and failed with `error` if it did.
    func finished(_ choice: Choice, bytes: UInt64, seconds: Double, error: FetchError?) {
        mirrors.withLock { mirrors in
            guard mirrors.indices.contains(choice.index) else { return }
            mirrors[choice.index].running -= 1
            mirrors[choice.index].bytes += bytes
            if bytes >= Self.measuredBytes && seconds > 0 {
                let measured = Double(bytes) / seconds
                mirrors[choice.index].speed = mirrors[choice.index].speed.map { $0 * 0.5 + measured * 0.5 } ?? measured
            }
            if error == nil {
                mirrors[choice.index].failures = 0
                mirrors[choice.index].lastError = nil
            }
        }
    }

    /// Sets `choice`'s mirror aside after a failure: for 2 s, doubling with each failure in a row up to 60 s.
    func setAside(_ choice: Choice, because error: FetchError) {
        let now = clock()
        mirrors.withLock { mirrors in
            guard mirrors.indices.contains(choice.index), mirrors[choice.index].condition != .dropped else { return }
            mirrors[choice.index].failures += 1
            let backoff = min(Self.longestBackoff,
                              Self.firstBackoff * Double(1 << min(10, mirrors[choice.index].failures - 1)))
            mirrors[choice.index].condition = .setAside(until: now + backoff)
            // A mirror that changed keeps its old validator, and so keeps answering 200 until the file's own
            // next version registers the mirrors afresh: bytes of its new version never mix with the old.
            mirrors[choice.index].lastError = error.userMessage
        }
    }

    /// Drops `choice`'s mirror for this file; never the primary, which is the file.
    func drop(_ choice: Choice, reason: String) {
        guard !choice.isPrimary else { return }
        mirrors.withLock { mirrors in
            guard mirrors.indices.contains(choice.index) else { return }
            mirrors[choice.index].condition = .dropped
            mirrors[choice.index].lastError = reason
        }
    }

    /// Records what a mirror's probe or first 206 said: its validator. Returns false (and drops the mirror) when
    /// its length is not `size`.
    @discardableResult
    func learn(_ index: Int, size: UInt64?, expected: UInt64, validator: String?) -> Bool {
        mirrors.withLock { mirrors in
            guard index > 0, mirrors.indices.contains(index) else { return true }
            if let size, size != expected {
                mirrors[index].condition = .dropped
                mirrors[index].lastError = "its length is \(size) bytes, not \(expected)"
                return false
            }
            if mirrors[index].validator == nil { mirrors[index].validator = validator }
            return true
        }
    }
}

extension MirrorSet {
    /// Records that mirror `index` served block `block`.
    func recordSource(block: Int, mirror index: Int) {
        guard block >= 0, index < 255 else { return }
        sources.withLock { sources in
            if sources.served.count <= block { sources.served += [UInt8](repeating: 0, count: block + 1 - sources.served.count) }
            sources.served[block] = UInt8(index + 1)
        }
    }

    /// The file failed its digest check and is fetched again: from now on each block avoids the mirror that served
    /// it, until `endRefetch`.
    package func beginRefetch() {
        sources.withLock { sources in
            sources.earlier = sources.served
            sources.served = []
        }
    }

    /// The refetched file passed its check.
    package func endRefetch() { sources.withLock { $0.earlier = nil } }

    /// The mirrors that served `blocks` before the refetch (none outside a refetch).
    func earlierSources(of blocks: Range<Int>) -> Set<Int> {
        sources.withLock { sources in
            guard let earlier = sources.earlier else { return [] }
            var found = Set<Int>()
            for block in blocks where block < earlier.count && earlier[block] > 0 { found.insert(Int(earlier[block]) - 1) }
            return found
        }
    }

    /// `run` cut where the mirror that served its blocks before the refetch changes, so that each piece can ask
    /// another mirror than its own earlier one; `run` whole outside a refetch.
    func pieces(of run: Range<Int>) -> [Range<Int>] {
        sources.withLock { sources in
            guard let earlier = sources.earlier, !run.isEmpty else { return [run] }
            func source(_ block: Int) -> UInt8 { block < earlier.count ? earlier[block] : 0 }
            var pieces: [Range<Int>] = []
            var start = run.lowerBound
            for block in run.dropFirst() where source(block) != source(block - 1) {
                pieces.append(start..<block)
                start = block
            }
            pieces.append(start..<run.upperBound)
            return pieces
        }
    }
}

/// The mirror sets of a mount's files, by primary URL.
package final class MirrorTable: Sendable {
    private let sets = LockedBox<[String: MirrorSet]>([:])

    /// Gives `urls[0]` the mirrors `urls[1...]` (replacing any it had); with no mirror, forgets them.
    @discardableResult
    func set(_ urls: [String]) -> MirrorSet? {
        guard let primary = urls.first else { return nil }
        var mirrorSet: MirrorSet? = MirrorSet(urls: urls)
        if mirrorSet?.urls.count == 1 { mirrorSet = nil }
        sets.withLock { $0[primary] = mirrorSet }
        return mirrorSet
    }

    package func mirrors(of url: String) -> MirrorSet? { sets.withLock { $0[url] } }
}
