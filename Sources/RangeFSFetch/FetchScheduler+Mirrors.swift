// The scheduler's side of mirrors (Mirrors.swift): a file given mirrors has each of them probed in the
// background, at most 64 probes at once, before they serve a byte.

import Logging
import RangeFSCache
import RangeFSSystem

extension FetchScheduler {
    /// Fetches the file `metadata` describes from `mirrors` too, and probes each of them now in the background:
    /// one whose length disagrees is dropped with a log line before it serves a byte, and each one's validator
    /// is learned for its own If-Range. No mirror forgets any the file had.
    package func useMirrors(_ mirrors: [String], for metadata: RemoteMetadata) {
        guard let mirrorSet = self.mirrors.set([metadata.url] + mirrors), metadata.sizeKnown else { return }
        for (index, url) in mirrorSet.urls.enumerated().dropFirst() {
            mirrorProbes.async { [self] in
                mirrorProbeSlots.wait()
                fetcher.probe(url: url) { [self] result in
                    mirrorProbeSlots.signal()
                    learn(result, of: mirrorSet, index: index, url: url, file: metadata)
                }
            }
        }
    }

    /// Records what the probe of mirror `index` of `file` found: its validator, or that it disagrees or failed.
    private func learn(_ result: Result<RemoteMetadata, FetchError>, of mirrorSet: MirrorSet, index: Int,
                       url: String, file metadata: RemoteMetadata) {
        let file = Redaction.redact(metadata.url)
        switch result {
        case .success(let found):
            if !mirrorSet.learn(index, size: found.sizeKnown ? found.size : nil, expected: metadata.size,
                                validator: found.ifRangeValidator) {
                logger.warning("mirror \(Redaction.redact(url)) is dropped for \(file): its length is \(found.size) bytes, not \(metadata.size)")
            }
        case .failure(let error):
            mirrorSet.setAside(MirrorSet.Choice(index: index, url: url, validator: nil), because: error)
            logger.warning("mirror \(Redaction.redact(url)) of \(file) is set aside: \(error.userMessage)")
        }
    }

    /// `run` in requests of at most a segment each, cut at the file's segment boundaries (multiples of the
    /// segment size), and where a refetch wants another mirror. Aligned requests never straddle a proxy group's
    /// 4 MiB shards or a slice cache's slices: every client asks each shard of the same proxy, whole, so a group
    /// of caches holds and fetches each slice once.
    func segments(of run: Range<Int>, in entry: any BlockStore, url: String) -> [Range<Int>] {
        let blocksPerSegment = max(1, Int(policy.segmentBytes / UInt64(entry.blockSize)))
        let pieces = mirrors.mirrors(of: url)?.pieces(of: run) ?? [run]
        return pieces.flatMap { piece in
            var segments: [Range<Int>] = []
            var start = piece.lowerBound
            while start < piece.upperBound {
                let boundary = (start / blocksPerSegment + 1) * blocksPerSegment
                segments.append(start..<min(piece.upperBound, boundary))
                start = boundary
            }
            return segments
        }
    }
}
