import Glibc
import Logging
import RangeFSControl
import RangeFSPlatform
import RangeFSSystem

/// Where rangefs's log lines go: stderr (the foreground, or a log file that stderr was pointed at), or syslog
/// (the background without --log-file, which journald collects, when a syslog daemon listens). The last warnings
/// and errors are also kept here, for `rangefs status`.
final class LogDestination: Sendable {
    enum Target: Sendable { case standardError, syslog }

    /// How many warnings and errors `recentErrors` keeps.
    static let recentLimit = 10

    private let target = LockedBox(Target.standardError)
    private let recent = LockedBox<[LogRecord]>([])

    /// The last warnings and errors, oldest first.
    var recentErrors: [LogRecord] { recent.withLock { $0 } }

    func remember(_ record: LogRecord) {
        recent.withLock { records in
            records.append(record)
            if records.count > Self.recentLimit { records.removeFirst(records.count - Self.recentLimit) }
        }
    }

    /// The local time as `YYYY-MM-DD HH:MM:SS`.
    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        return cFormat("%04d-%02d-%02d %02d:%02d:%02d", parts.tm_year + 1900, parts.tm_mon + 1,
                       parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    func use(_ newTarget: Target) {
        if newTarget == .syslog { openlog("rangefs", LOG_PID, LOG_DAEMON) }
        target.withLock { $0 = newTarget }
    }

    var current: Target { target.withLock { $0 } }
}

/// A swift-log handler that writes to the current `LogDestination`.
struct RangefsLogHandler: LogHandler {
    let label: String
    let destination: LogDestination
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let (level, message) = (event.level, event.message)
        let stamp = LogDestination.timestamp()
        if level >= .warning { destination.remember(LogRecord(time: stamp, level: "\(level)", message: "\(message)")) }
        switch destination.current {
        case .standardError:
            let text = "\(stamp) \(level) \(label): \(message)\n"
            _ = text.withCString { write(2, $0, strlen($0)) }
        case .syslog:
            let priority: Int32 = switch level {
            case .trace, .debug: LOG_DEBUG
            case .info: LOG_INFO
            case .notice: LOG_NOTICE
            case .warning: LOG_WARNING
            case .error: LOG_ERR
            case .critical: LOG_CRIT
            }
            "\(message)".withCString { text in withVaList([text]) { vsyslog(priority, "%s", $0) } }
        }
    }
}
