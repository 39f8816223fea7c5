// A file whose server sends no length is streamed into an entry of a capacity (the store's, through BlockStore). When
// its body outgrows that capacity, the transfer is not ended and asked again from byte 0 (a 64 MiB file then cost
// 84.5 MiB): the bytes past the capacity that came with the last body call are kept here, the transfer pauses
// (`isPaused`: libcurl holds what comes next and the server waits on the socket), the store grows the entry off
// this thread, and once the grown entry is here the same transfer moves to it, hands it the kept bytes, and goes
// on. One connection, every byte once.
//
// Threads: the body calls come on the fetcher's thread; the grown entry comes on the store's. They meet in
// `growth`, under its lock: the store's side only records the entry and wakes the fetcher, which moves the sink
// at its next call. A transfer whose body ended while it waited (its last bytes came with the call that outgrew)
// leaves its `complete` in `growth`, and the store's side runs it, after which the fetcher calls nothing more.
import RangeFSCache

extension BlockSink {
    /// Where a stream that outgrew its entry stands while the store grows it.
    struct Growth {
        /// The store is growing the entry: the transfer is paused.
        var waiting = false
        /// The grown entry, for the fetcher's thread to move to.
        var grown: (any BlockStore)?
        /// The store could not grow the entry: the stream ends, failed.
        var failed = false
        /// The transfer ended while it waited: its outcome, for `complete` once the grown entry is here.
        var deferredCompletion: FetchError??
        /// The bytes past the capacity that came with the last body call before the growth, for the grown entry.
        var overflow: [UInt8] = []
        /// Whether the fetcher's thread has something to take up before the next bytes (`adoptGrownEntry`).
        var pending: Bool { !overflow.isEmpty || grown != nil || failed }
    }

    /// The body went past the entry's capacity with `remaining` bytes of the current call in hand: keeps them,
    /// pauses, and asks the store for an entry with more room.
    func outgrowEntry(keeping remaining: UnsafeRawBufferPointer) {
        growth.withLock { growth in
            growth.overflow = Array(remaining)
            growth.waiting = true
        }
        let engine = context.engines.engine(for: priority)
        entry.stream(.outgrew(next: { [self] grown in
            let deferred = growth.withLock { growth -> FetchError?? in
                growth.waiting = false
                if let grown { growth.grown = grown } else { growth.failed = true }
                defer { growth.deferredCompletion = nil }
                return growth.deferredCompletion
            }
            // The fetcher calls this sink no more once it completed: its completion runs here.
            if let deferred { complete(error: deferred) } else { engine.wake() }
        }))
    }

    /// Whether the transfer ended while its entry was being grown: `complete` is then left for the store's side.
    func deferWhileGrowing(_ error: FetchError?) -> Bool {
        growth.withLock { growth in
            guard growth.waiting else { return false }
            growth.deferredCompletion = .some(error)
            return true
        }
    }

    /// Moves to the grown entry and hands it the bytes kept past the old capacity. False, with `failure`, when the
    /// store could not grow the entry or the bytes could not be stored.
    func adoptGrownEntry() -> Bool {
        let (grown, failed, kept) = growth.withLock { growth in
            defer { (growth.grown, growth.failed, growth.overflow) = (nil, false, []) }
            return (growth.grown, growth.failed, growth.overflow)
        }
        guard !failed, let grown else {
            current.failure = current.failure ?? .transport("the cache entry of a file without a length could not grow")
            return false
        }
        let old = entry
        move(to: grown, blocks: 0..<grown.blockCount)
        context.owner.moved(self, from: old, to: grown)
        partial = grown.makeBuffer(capacity: grown.length(ofBlock: nextBlock))
        // SAFETY: the buffer lives for the call; `store` copies what it keeps into block buffers.
        return kept.withUnsafeBytes { store($0) }
    }
}
