// Whitespace trimming for header values, listing fields and names. In System/ because Fetch (headers) and Catalog
// (names, listings) both trim.

extension StringProtocol {
    /// The text without its leading spaces and tabs and its trailing spaces, tabs and line ends.
    /// Byte by byte: the bytes trimmed are ASCII, so what is left starts and ends on a character boundary of the
    /// UTF-8 text (its first or last character may carry a combining mark, as it would in the text). A line end
    /// "\r\n" goes too (as one Character it was kept, being neither "\r" nor "\n").
    /// Inlinable: a generic across the layers' module boundaries is otherwise not specialised for its String or
    /// Substring, and walks the UTF-8 view through witness tables (issue 48: 2.5% of a cold small-file read).
    @inlinable
    package func trimmingWhitespace() -> String {
        let bytes = utf8
        var start = bytes.startIndex
        while start != bytes.endIndex, bytes[start] == 0x20 || bytes[start] == 0x09 { bytes.formIndex(after: &start) }
        // Forwards to the last byte that is no trailing white space (a generic UTF-8 view walks forwards only).
        var end = start, index = start
        while index != bytes.endIndex {
            let byte = bytes[index]
            bytes.formIndex(after: &index)
            if !(byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A) { end = index }
        }
        return String(self[start..<end])
    }
}
