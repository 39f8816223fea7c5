import Foundation

/// Hides credentials in URLs before they are shown anywhere (logs, xattrs, errors, status).
public enum Redaction {
    /// `https://user:secret@host/path` becomes `https://***@host/path`; other URLs are unchanged.
    public static func redact(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return url }
        return String(url[..<schemeEnd.upperBound]) + "***" + String(rest[at...])
    }
}
