import Glibc
import RangeFSPlatform
import Synchronization
import XCTest

/// Issue 37: what RangeFSPlatform gives in place of Foundation's (whose ICU data would be most of the package):
/// printf formatting, trimming, named threads and a condition with a deadline.
final class PlatformTests: XCTestCase {
    func testCFormatWritesWhatPrintfWrites() {
        XCTAssertEqual(cFormat("%.1f MiB", 1.25 * 1_048_576 / 1_048_576), "1.2 MiB", "printf rounds a tie to even")
        XCTAssertEqual(cFormat("%.1f%%", 99.96), "100.0%")
        XCTAssertEqual(cFormat("%04d-%02d-%02d %02d:%02d:%02d", 2026, 11, 26, 4, 5, 6), "2026-11-26 04:05:06")
        XCTAssertEqual(cFormat("\\x%02X", UInt32(7)), "\\x07")
        XCTAssertEqual(cFormat("%%%02X", UInt8(0xE9)), "%E9")
        XCTAssertEqual(cFormat("%.3f", 0.0004), "0.000")
        let long = String(repeating: "é", count: 300)
        XCTAssertEqual(long.withCString { cFormat("%s!", $0) }, long + "!", "600 bytes of output come whole")
    }

    func testTrimmedDropsWhiteSpaceOrTheGivenCharactersAtBothEndsOnly() {
        XCTAssertEqual(" \t a  b \r\n".trimmed(), "a  b")
        XCTAssertEqual("\u{00A0}x\u{2003}".trimmed(), "x", "Unicode white space too, as Foundation's set had")
        XCTAssertEqual("  \n ".trimmed(), "")
        XCTAssertEqual(" bytes 0-9/10\r\n".trimmed(), "bytes 0-9/10", "a header line's end")
        XCTAssertEqual("\u{00A0} é x \u{2028}".trimmed(), "é x", "non-ASCII white space at an end")
        XCTAssertEqual(" e\u{301}\t".trimmed(), "e\u{301}", "a combining mark on the last letter stays")
        for text in ["x \u{301}", " \u{301}x", "\r\n\u{85}a\u{2029}", "\u{3000}", "a\u{A0} ", "\t\u{301}"] {
            XCTAssertEqual(text.trimmed(), text.trimmed(while: \.isWhitespace), "the byte-wise path agrees: \(text.unicodeScalars.map(\.value))")
        }
        XCTAssertEqual("".trimmed(), "")
        XCTAssertEqual(Substring("\"sha-256\",").trimmed(while: { $0 == "\"" || $0 == "," }), "sha-256")
        XCTAssertEqual("::a:b::".trimmed(while: { $0 == ":" }), "a:b")
    }

    /// The thread runs under its name (what `top -H` shows), and its broadcast ends a wait before the deadline.
    func testAStartedThreadRunsUnderItsNameAndItsBroadcastEndsAWait() {
        let condition = Condition()
        let seen = Mutex<String?>(nil)
        startThread(name: "rangefs-test-thread") {
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unreadable"
            condition.withLock {
                seen.withLock { $0 = name }
                condition.broadcast()
            }
        }
        let deadline = Condition.deadline(after: 600)
        let answer: String? = condition.withLock {
            while seen.withLock({ $0 }) == nil {
                if !condition.wait(until: deadline) { break }
            }
            return seen.withLock { $0 }
        }
        XCTAssertEqual(answer, "rangefs-test-th\n", "the kernel keeps the first 15 bytes of the name")
    }

    func testAWaitWithoutABroadcastEndsAtItsDeadline() {
        let condition = Condition()
        let deadline = Condition.deadline(after: 0)
        XCTAssertFalse(condition.withLock { condition.wait(until: deadline) })
    }

    /// Percent-decoding keeps what is not a valid escape, and the whole text when the bytes are not UTF-8.
    func testPercentDecodingKeepsBadEscapesAndNonUTF8AsWritten() {
        XCTAssertEqual(PercentEncoding.decode("p%40ss%3Aw%2Fd"), "p@ss:w/d")
        XCTAssertEqual(PercentEncoding.decode("a%zz%41"), "a%zzA")
        XCTAssertEqual(PercentEncoding.decode("%FF%41"), "%FF%41")
        XCTAssertEqual(PercentEncoding.bytes("%FF%41"), [0xFF, 0x41])
        XCTAssertEqual(PercentEncoding.decode("%+f%-0x"), "%+f%-0x", "a sign is no hex digit")
    }
}
