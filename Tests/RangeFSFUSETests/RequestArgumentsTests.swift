import Dispatch
import XCTest
@testable import RangeFSFUSE

/// The adapter's argument handling without /dev/fuse: READDIR offsets and paging, the xattr size protocol, and
/// the race between a READ's completion and its INTERRUPT.
final class RequestArgumentsTests: XCTestCase {
    private let children = (0..<5).map { (position: $0, name: "file\($0)", inode: UInt64(100 + $0), isDirectory: $0 == 4) }

    func testAReaddirFromOffsetZeroStartsWithDotAndDotDotThenTheChildrenNumberedOnePastTheirIndex() {
        let rows = DirectoryPage.rows(offset: 0, directory: 7, parent: 1, children: children)
        XCTAssertEqual(rows.map(\.name), [".", "..", "file0", "file1", "file2", "file3", "file4"])
        XCTAssertEqual(rows.map(\.offset), [1, 2, 3, 4, 5, 6, 7], "entry n carries offset n + 1")
        XCTAssertEqual(rows[0].inode, 7)
        XCTAssertEqual(rows[1].inode, 1, ".. is the parent")
        XCTAssertTrue(rows[6].isDirectory)
        XCTAssertFalse(rows[2].isDirectory)
    }

    func testAReaddirThatContinuesAfterAnOffsetSendsNothingTwice() {
        // The kernel passes back the offset of the last entry it took: the next page starts right after it.
        let all = DirectoryPage.rows(offset: 0, directory: 7, parent: 1, children: children)
        for taken in 1...all.count {
            let (from, _) = DirectoryPage.children(offset: Int64(taken), bufferSize: 4096, plus: false)
            let rest = DirectoryPage.rows(offset: Int64(taken), directory: 7, parent: 1,
                                          children: Array(children.dropFirst(from)))
            XCTAssertEqual(rest.map(\.offset), all.map(\.offset).filter { $0 > taken }, "after offset \(taken)")
        }
    }

    func testTheChildrenAskedForFitTheBuffer() {
        XCTAssertEqual(DirectoryPage.children(offset: 0, bufferSize: 4096, plus: false).count, 4096 / 24 + 1)
        XCTAssertEqual(DirectoryPage.children(offset: 0, bufferSize: 4096, plus: true).count, 4096 / 152 + 1)
        XCTAssertEqual(DirectoryPage.children(offset: 0, bufferSize: 4096, plus: false).from, 0,
                       "offsets 0, 1 and 2 all start at the first child")
        XCTAssertEqual(DirectoryPage.children(offset: 2, bufferSize: 4096, plus: false).from, 0)
        XCTAssertEqual(DirectoryPage.children(offset: 10, bufferSize: 4096, plus: true).from, 8)
        XCTAssertEqual(DirectoryPage.children(offset: -5, bufferSize: 4096, plus: false).from, 0,
                       "a negative offset is read as the start")
        XCTAssertEqual(DirectoryPage.children(offset: 0, bufferSize: 0, plus: false).count, 1)
    }

    func testTheXattrSizeProtocol() {
        let value = Array("http://example.com/a".utf8)
        XCTAssertEqual(SizedAnswer(value, bufferSize: 0), .size(value.count), "size 0 asks how big the value is")
        XCTAssertEqual(SizedAnswer(value, bufferSize: value.count - 1), .tooSmall(needed: value.count),
                       "a buffer one byte short gets ERANGE")
        XCTAssertEqual(SizedAnswer(value, bufferSize: value.count), .value(value))
        XCTAssertEqual(SizedAnswer(value, bufferSize: 4096), .value(value), "a larger buffer gets the value only")
        XCTAssertEqual(SizedAnswer([], bufferSize: 0), .size(0))
        XCTAssertEqual(SizedAnswer([], bufferSize: 16), .value([]))
    }

    func testAReadIsAnsweredOnceEvenWhenItsInterruptRacesItsCompletion() {
        let pending = PendingReads()
        let ids = (0..<2000).map { _ in pending.begin() }
        XCTAssertEqual(Set(ids).count, ids.count, "IDs are unique")
        XCTAssertFalse(ids.contains(0), "0 cannot travel as the interrupt callback's data")
        let answers = Mutex([Int](repeating: 0, count: ids.count))
        // For each read, the completion and the interrupt try to answer at the same time.
        DispatchQueue.concurrentPerform(iterations: ids.count * 2) { index in
            let read = index / 2
            if pending.finish(ids[read]) { answers.withLock { $0[read] += 1 } }
        }
        XCTAssertEqual(answers.withLock { $0 }, [Int](repeating: 1, count: ids.count), "exactly one answer each")
        XCTAssertEqual(pending.count, 0)
        XCTAssertFalse(pending.finish(ids[0]), "an answered read cannot be answered again")
    }
}

import Synchronization
