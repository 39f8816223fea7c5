import Foundation
@testable import RangeFSCache
@testable import RangeFSFetch
import XCTest

/// The block table's rules, without a file: claims, waiters, arrival, writing, memory, eviction and checks.
final class BlockTableTests: XCTestCase {
    func table(_ blockCount: Int, present: [Int] = []) -> BlockTable {
        var durable = BlockBitmap(blockCount: blockCount)
        for index in present { durable.insert(index) }
        return BlockTable(durable: durable)
    }

    /// A waiter that records what it was told.
    final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private var results: [Result<Void, BlockFailure>] = []
        var waiter: BlockWaiter { { result in self.lock.withLock { self.results.append(result) } } }
        var successes: Int { lock.withLock { results.filter { if case .success = $0 { true } else { false } }.count } }
        var failures: [FetchError] {
            lock.withLock { results.compactMap { if case .failure(let error) = $0 { FetchError(error) } else { nil } } }
        }
    }

    func claimedRuns(_ request: BlockTable.Request) -> [Range<Int>]? {
        if case .waiting(let claimed) = request { return claimed }
        return nil
    }

    func testAReaderClaimsOnlyWhatNobodyFetchesAndIsWokenWhenAllItsBlocksArrived() {
        var blocks = table(10, present: [3])
        let first = Recorder(), second = Recorder()
        XCTAssertEqual(claimedRuns(blocks.request(2..<6, waiter: first.waiter)), [2..<3, 4..<6])
        XCTAssertEqual(claimedRuns(blocks.request(5..<8, waiter: second.waiter)), [6..<8], "5 is already claimed")
        XCTAssertTrue(blocks.received(2).isEmpty)
        XCTAssertTrue(blocks.received(4).isEmpty)
        let woken = blocks.received(5)
        XCTAssertEqual(woken.count, 1, "the first reader has 2, 3, 4 and 5 now")
        woken.forEach { $0(.success(())) }
        XCTAssertEqual(first.successes, 1)
        XCTAssertEqual(second.successes, 0, "6 and 7 are still missing")
        XCTAssertTrue(blocks.isReadable(5) && blocks.inMemory.contains(5) && blocks.inFlight.contains(5),
                      "received: readable from memory, still claimed until written")
        if case .ready = blocks.request(2..<6, waiter: Recorder().waiter) {} else { XCTFail("readable blocks are ready") }
    }

    func testWritingMakesABlockPresentAndAFailedWriteLeavesItInMemoryOnly() {
        var blocks = table(4)
        _ = blocks.request(0..<2, waiter: Recorder().waiter)
        _ = blocks.received(0)
        _ = blocks.received(1)
        blocks.written(0, directly: true)
        XCTAssertTrue(blocks.present.contains(0) && blocks.verified.contains(0))
        XCTAssertFalse(blocks.inMemory.contains(0) || blocks.inFlight.contains(0))
        blocks.writeFailed(1)
        XCTAssertFalse(blocks.present.contains(1) || blocks.inFlight.contains(1))
        XCTAssertTrue(blocks.isReadable(1), "served from memory")
        blocks.droppedFromMemory(1)
        XCTAssertFalse(blocks.isReadable(1), "dropped: absent again, fetched again when read")
        XCTAssertEqual(claimedRuns(blocks.request(0..<2, waiter: Recorder().waiter)), [1..<2])
        XCTAssertEqual(blocks.takeWrittenDirectly(0..<4), [0])
        XCTAssertEqual(blocks.takeWrittenDirectly(0..<4), [], "asked for once")
    }

    func testAbandonFailsTheWaitersOfAbsentBlocksAndReleasesTheirClaims() {
        var blocks = table(6, present: [1])
        let reader = Recorder()
        _ = blocks.request(0..<3, waiter: reader.waiter)
        let failed = blocks.abandon(0..<3)
        failed.forEach { $0(.failure(FetchError.timedOut.blockFailure)) }
        XCTAssertEqual(reader.failures, [.timedOut])
        XCTAssertTrue(blocks.present.contains(1), "present blocks stay")
        XCTAssertFalse(blocks.inFlight.contains(0) || blocks.inFlight.contains(2))
        XCTAssertTrue(blocks.received(0).isEmpty, "the failed reader is gone")
        let other = Recorder()
        _ = blocks.request(4..<6, waiter: other.waiter)
        XCTAssertEqual(blocks.removeAllWaiters().count, 1)
    }

    func testFillClaimsRunsFromItsCursorWrappingAroundAndSkippingWhatIsHereOrClaimed() {
        var blocks = table(10, present: [0, 1, 7])
        _ = blocks.claim(4..<5)
        let first = blocks.claimNextRun(from: 2, limit: 3)
        XCTAssertEqual(first?.run, 2..<4, "stops at the claimed block 4")
        XCTAssertEqual(first?.next, 4)
        XCTAssertEqual(blocks.claimNextRun(from: 4, limit: 3)?.run, 5..<7, "stops at the present block 7")
        XCTAssertEqual(blocks.claimNextRun(from: 7, limit: 3)?.run, 8..<10)
        blocks.releaseClaims(2..<3)
        XCTAssertEqual(blocks.claimNextRun(from: 9, limit: 3)?.run, 2..<3, "wraps around to the start")
        XCTAssertNil(blocks.claimNextRun(from: 0, limit: 3), "everything missing is claimed")
    }

    func testChecksEvictionAndCommitsChangeOnlyWhatTheyShould() {
        var blocks = table(4, present: [0, 1, 2])
        XCTAssertEqual(blocks.unverified(0..<4), [0, 1, 2], "blocks from an earlier run are checked first")
        XCTAssertFalse(blocks.checked(0, matches: true))
        XCTAssertTrue(blocks.checked(1, matches: false), "a failed check makes the block absent")
        XCTAssertEqual(blocks.unverified(0..<4), [2])
        XCTAssertFalse(blocks.present.contains(1))
        XCTAssertTrue(blocks.isEvictable(2))
        _ = blocks.request(2..<4, waiter: Recorder().waiter)
        XCTAssertTrue(blocks.isAwaited(3))
        XCTAssertFalse(blocks.isEvictable(3), "absent, claimed and awaited")
        XCTAssertFalse(blocks.isEvictable(1), "absent")
        blocks.evicted(0)
        XCTAssertEqual(blocks.present.setCount, 1)
        XCTAssertEqual(blocks.durable.setCount, 3, "the disk's bitmap changes only at a commit")
        blocks.committed(blocks.present)
        XCTAssertEqual(blocks.durable, blocks.present)
        blocks.forgetChecks()
        XCTAssertEqual(blocks.unverified(0..<4), [2])
    }

    func testRunsAndGeometry() {
        XCTAssertEqual(BlockTable.runs(of: [1, 2, 3, 5, 7, 8]), [1..<4, 5..<6, 7..<9])
        let geometry = BlockGeometry(blockSize: 100, size: 250)
        XCTAssertEqual(geometry.blockCount, 3)
        XCTAssertEqual(geometry.blocks(covering: 99..<101), 0..<2)
        XCTAssertEqual(geometry.byteRange(of: 2..<3), 200..<250)
        XCTAssertEqual(geometry.length(ofBlock: 2), 50)
        var present = BlockBitmap(blockCount: 3)
        present.insert(0)
        present.insert(2)
        XCTAssertEqual(geometry.bytes(in: present), 150)
    }
}
