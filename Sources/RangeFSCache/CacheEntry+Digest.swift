// The end-to-end check of a complete entry (the policy, where the expected digest comes from and what a mismatch
// does, is the file system). Here: hashing the data file in one background pass, the `digest` record
// that remembers the verdict across mounts (CacheFormat.swift), and dropping every block for a refetch.
//
// The hash reads the data file with pread, never the mapping (mlock would stall the replies' page faults), and
// never on a reader's path: it runs on the checker's queue. Blocks loaded from an earlier run are checked against
// their CRC first, so a block the disk damaged is fetched again, not blamed on the server. The whole file is
// marked as being served meanwhile, so eviction cannot punch a hole into what is being hashed.

import Logging
import RangeFSSystem

extension CacheEntry {
    /// The verdict of the last end-to-end check of this version of the file, if one was recorded.
    package var digestRecord: DigestRecord? { state.withLock { $0.digest } }

    /// Whether the data is known to be wrong: a mismatch survived a refetch. Such an entry serves nothing.
    package var isKnownWrong: Bool { failedDigest.load(ordering: .relaxed) }

    /// Computes the digest of the complete data with `algorithm`; nil if the entry is not complete (or stops being
    /// complete meanwhile: a block failed its CRC, or the file changed), or the data cannot be read.
    package func computeDigest(_ algorithm: DigestAlgorithm) -> ContentDigest? {
        guard isComplete, !isStale, !isKnownWrong else { return nil }
        let chunk = max(1, (4 << 20) / blockSize)
        for start in stride(from: 0, to: blockCount, by: chunk) {
            verifyLoadedBlocks(start..<min(blockCount, start + chunk), inPlace: false)
        }
        let everything = 0..<blockCount
        beginServing(everything)
        defer { endServing(everything) }
        guard isComplete else { return nil }
        let hasher = DigestHasher(algorithm)
        var offset: UInt64 = 0
        let step = UInt64(chunk * blockSize)
        while offset < size {
            let count = Int(min(step, size - offset))
            do {
                let bytes = try dataFile.read(at: offset, count: count)
                guard bytes.count == count else { return nil }
                hasher.update(bytes)
            } catch {
                logger.warning("cannot read \(directory) to check its digest: \(error)")
                return nil
            }
            offset += UInt64(count)
        }
        // A block evicted or found changed meanwhile: the hash is of no version, and is dropped.
        guard isComplete, !isStale else { return nil }
        return hasher.finish()
    }

    /// Records the verdict of a check in the entry's `.digest` file and in memory. A record that cannot be written
    /// still holds for this process (and the check is made again after a remount).
    package func record(_ record: DigestRecord) {
        state.withLock { $0.digest = record }
        failedDigest.store(record.verdict == .mismatch, ordering: .relaxed)
        do {
            try FileSystemCalls.replaceAtomically(files.digestPath, with: record.encoded())
        } catch {
            logger.warning("cannot record the digest check of \(Redaction.redact(header.url)): \(error)")
        }
    }

    /// Forgets the recorded verdict (`rangefs evict`, or a refetch that starts over).
    func forgetDigest() {
        state.withLock { $0.digest = nil }
        failedDigest.store(false, ordering: .relaxed)
        do {
            try FileSystemCalls.removeFile(files.digestPath)
        } catch {
            logger.warning("cannot remove the digest record of \(directory): \(error)")
        }
    }

    /// Makes every present block absent, so that the whole file is fetched again; the data stays in place until
    /// the new blocks overwrite it, and the next commit makes the drop durable. Returns the bytes dropped.
    package func dropAllBlocks() -> UInt64 {
        let dropped = state.withLock { state -> UInt64 in
            let present = state.blocks.present
            for index in 0..<blockCount where present.contains(index) { state.blocks.evicted(index) }
            for index in state.memory.removeAll() { state.blocks.droppedFromMemory(index) }
            state.changedSinceCommit = true
            state.refetching = true
            return geometry.bytes(in: present)
        }
        ledger.account(-Int(dropped))
        return dropped
    }
}
