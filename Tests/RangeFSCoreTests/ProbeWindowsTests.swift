import Foundation
@testable import RangeFSFileSystem
import XCTest

/// Probes of listed files per server (issue 45, case 12): a few at once at first, half as many more after as many
/// quick answers as there are probes at once (at most once a second), and half as many, for good, after an answer
/// that waited most of a second (a connection attempt the server's listen backlog dropped, which TCP sends again
/// after 1 s).
final class ProbeWindowsTests: XCTestCase {
    /// Probes started and not yet done, by number.
    private final class Started: @unchecked Sendable {
        // @unchecked Sendable: every access holds `lock`.
        private let lock = NSLock()
        private var pending: [Int: @Sendable () -> Void] = [:]
        private(set) var order: [Int] = []

        func add(_ number: Int, _ done: @escaping @Sendable () -> Void) {
            lock.withLock { pending[number] = done; order.append(number) }
        }

        func finish(_ number: Int) {
            let done = lock.withLock { pending.removeValue(forKey: number) }
            done?()
        }

        var running: [Int] { lock.withLock { pending.keys.sorted() } }
    }

    private func submit(_ windows: ProbeWindows, _ numbers: Range<Int>, to started: Started,
                        host: String = "http://a.example") {
        for number in numbers {
            windows.run("\(host)/f\(number)") { done in started.add(number, done) }
        }
    }

    func testAServerStartsWithAFewProbesAndGrowsByHalfForEachRoundOfQuickAnswers() {
        let windows = ProbeWindows(growthInterval: 0)
        let started = Started()
        submit(windows, 0..<40, to: started)
        XCTAssertEqual(started.running, [0, 1, 2, 3], "four at first")
        submit(windows, 100..<105, to: started, host: "http://b.example")
        XCTAssertEqual(started.order.count, 8, "each server has its own window")
        for number in 0..<3 { started.finish(number) }
        XCTAssertEqual(started.running.filter { $0 < 40 }.count, 4, "fewer than a round of quick answers")
        started.finish(3)
        XCTAssertEqual(started.running.filter { $0 < 40 }.count, 6, "a round of four quick answers: two more")
        XCTAssertEqual(windows.width(of: "http://a.example/x"), 6)
        for number in 4..<10 { started.finish(number) }  // a round of 6
        XCTAssertEqual(windows.width(of: "http://a.example/x"), 9)
        XCTAssertEqual(started.order.filter { $0 < 40 }, Array(0..<19), "in the order asked, 9 at once")
    }

    func testAnAnswerThatWaitedForADroppedConnectionHalvesTheWindowForGood() {
        let windows = ProbeWindows(growthInterval: 0)
        let started = Started()
        submit(windows, 0..<100, to: started)
        for number in 0..<10 { started.finish(number) }  // the fastest answers: width 9
        XCTAssertEqual(windows.width(of: "http://a.example/"), 9)
        let slow = started.running.last!
        Thread.sleep(forTimeInterval: ProbeWindows.dropDelay + 0.3)
        started.finish(slow)
        XCTAssertEqual(windows.width(of: "http://a.example/"), 4, "halved")
        // Those begun with it waited as long: the same burst, not halved again.
        started.finish(started.running.first!)
        XCTAssertEqual(windows.width(of: "http://a.example/"), 4)
        for _ in 0..<10 { for number in started.running { started.finish(number) } }
        XCTAssertEqual(windows.width(of: "http://a.example/"), 4, "never wider than where answers waited")
        XCTAssertLessThanOrEqual(started.running.count, 4)
    }

    func testAWindowGrowsAtMostOnceASecond() {
        let windows = ProbeWindows()
        let started = Started()
        submit(windows, 0..<100, to: started)
        for number in 0..<30 { started.finish(number) }
        XCTAssertEqual(windows.width(of: "http://a.example/"), 6, "once, however many answers came")
    }
}
