// Fuzz target: Redaction, which every URL goes through before it is shown (logs, xattrs, status, errors). The
// input is three parts split at NUL: a password, a path and a query value, built into
// `https://user:PASSWORD@files.example.org/PATH?token=VALUE&x=1#frag`; and, whole, any text a URL could be.
// Properties: neither secret shows in the redacted URL (where no other part of it holds the same text), the
// userinfo and the query's values are hidden, and redacting twice gives what redacting once gave, for any text.


@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRedaction(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if let broken = redactionPropertyBroken(fuzzBytes(data, size)) { fuzzRequire(false, broken) }
    return 0
}
