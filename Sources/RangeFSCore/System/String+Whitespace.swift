// Whitespace trimming for header values, listing fields and names. In System/ because Fetch (headers) and Catalog
// (names, listings) both trim.

extension StringProtocol {
    /// The text without its leading spaces and tabs and its trailing spaces, tabs and line ends.
    func trimmingWhitespace() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }).reversed())
    }
}
