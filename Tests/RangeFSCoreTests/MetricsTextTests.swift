@testable import RangeFSSystem
import XCTest

/// The Prometheus text that `--metrics` serves: one HELP and TYPE per counter, sorted series, escaped labels.
final class MetricsTextTests: XCTestCase {
    func testSeriesAreGroupedUnderTheirNameWithLabelsEscapedAndUnlabeledCountersStartAtZero() {
        let metrics = Metrics()
        metrics.add("rangefs_fetch_errors_total", labels: ["kind": "timed_out"])
        metrics.add("rangefs_fetch_errors_total", 2, labels: ["kind": "timed_out"])
        metrics.add("rangefs_proxy_bytes_total", 10, labels: ["proxy": "http://p\"1\\x\n"])
        metrics.add("rangefs_read_bytes_total", 0, labels: ["result": "hit"])  // nothing added: no series
        let text = metrics.prometheusText
        XCTAssertTrue(text.contains("# TYPE rangefs_fetch_errors_total counter\nrangefs_fetch_errors_total{kind=\"timed_out\"} 3\n"), text)
        XCTAssertTrue(text.contains("rangefs_proxy_bytes_total{proxy=\"http://p\\\"1\\\\x\\n\"} 10\n"), text)
        XCTAssertTrue(text.contains("\nrangefs_evicted_bytes_total 0\n"), text)
        XCTAssertTrue(text.contains("\nrangefs_passthrough_opens_total 0\n"), text)
        XCTAssertFalse(text.contains("rangefs_read_bytes_total{"), text)
        XCTAssertEqual(text.components(separatedBy: "# HELP ").count - 1, Metrics.help.count)
        XCTAssertEqual(metrics.value("rangefs_fetch_errors_total", labels: ["kind": "timed_out"]), 3)
    }
}
