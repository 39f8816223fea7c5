import Dispatch
import Glibc
import RangeFSSystem
import XCTest

/// The daemon's lock (LockedBox.swift): every shared value of the core is kept in one since issue 46 replaced
/// `Synchronization.Mutex`, whose spin cost eight readers of a cached tree 29% of the daemon's samples.
final class LockedBoxTests: XCTestCase {
    /// Many threads that each read the value, give up their core, and write it back plus one: without the lock the
    /// yields between the read and the write lose increments (each thread's write is of a value read before
    /// others' writes); with it, every increment counts. More threads than cores, as in the daemon.
    func testTakersOnMoreThreadsThanCoresNeverLoseAnUpdate() {
        let box = LockedBox(0)
        let threads = 16, rounds = 2_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds {
                box.withLock { value in
                    let read = value
                    sched_yield()
                    value = read + 1
                }
            }
        }
        XCTAssertEqual(box.withLock { $0 }, threads * rounds)
    }

    /// A taker that finds the lock held waits for its release, then sees what the holder wrote.
    func testATakerWaitsForTheHolderAndSeesItsWrite() {
        let box = LockedBox([String]())
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            box.withLock { names in
                holding.signal()
                release.wait()
                names.append("holder")
            }
        }
        holding.wait()
        let waiting = LockedBox(false)
        DispatchQueue.global().async {
            box.withLock { names in names.append("taker") }
            waiting.withLock { $0 = true }
            done.signal()
        }
        // The taker cannot have run: the holder has not appended yet.
        XCTAssertEqual(waiting.withLock { $0 }, false)
        release.signal()
        done.wait()
        XCTAssertEqual(box.withLock { $0 }, ["holder", "taker"])
    }

    private struct Refused: Error, Equatable {}

    /// An error thrown under the lock reaches the caller with its type, and the lock is free again after it.
    func testAThrowingBodyReleasesTheLock() {
        let box = LockedBox(1)
        XCTAssertThrowsError(try box.withLock { (value: inout Int) throws(Refused) -> Void in
            value = 2
            throw Refused()
        }) { error in
            XCTAssertEqual(error as? Refused, Refused())
        }
        let taken = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            box.withLock { $0 += 1 }
            taken.signal()
        }
        taken.wait()
        XCTAssertEqual(box.withLock { $0 }, 3, "the write before the throw stays, and another thread took the lock")
    }

    private struct Token: ~Copyable {
        var uses = 0
    }

    /// A value that cannot be copied is kept and changed in place.
    func testAValueThatCannotBeCopiedIsChangedInPlace() {
        let box = LockedBox(Token())
        for _ in 0..<3 { box.withLock { $0.uses += 1 } }
        XCTAssertEqual(box.withLock { $0.uses }, 3)
    }
}
