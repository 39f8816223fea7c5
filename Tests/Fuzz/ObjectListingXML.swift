// Fuzz target: an object store's answer to ListObjectsV2, or its <Error> body (ObjectListingXML over ShallowXML).
// Properties: no answer is both a page and an error; a page's sizes are sizes a file can have; a page written back
// as XML (escaped, and again url-encoded the way rclone writes it) reads back as the same page; the first half of
// an answer is no page, or the same page (a cut answer never yields a different listing); an error has a code,
// and each of its fields is one trimmed line of printable scalars, at most 300 (the code 64).

@testable import RangeFSCatalog
@testable import RangeFSObjectStore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzObjectListingXML(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    let page = ObjectListingXML.page(bytes)
    let error = ObjectListingXML.error(bytes)
    fuzzRequire(page == nil || error == nil, "an answer read as both a page and an error")
    if let error {
        fuzzRequire(!error.code.isEmpty, "an error without a code")
        for field in [error.code, error.message, error.bucket, error.key, error.resource, error.region] {
            guard let field else { continue }
            fuzzRequire(!field.unicodeScalars.contains { ObjectListingXML.isUnprintable($0) },
                        "error field \(field.debugDescription) is not one printable line")
            fuzzRequire(field.unicodeScalars.count <= ObjectListingXML.fieldLimit && !field.hasPrefix(" ")
                        && !field.hasSuffix(" "), "error field \(field.debugDescription) is long or untrimmed")
        }
        fuzzRequire(error.code.unicodeScalars.count <= ObjectListingXML.codeLimit, "code \(error.code) is long")
    }
    guard let page else { return 0 }
    for object in page.objects {
        if let size = object.size { fuzzRequire(size <= UInt64(Int64.max), "size \(size)") }
        if let etag = object.etag { fuzzRequire(!etag.isEmpty, "an empty ETag kept") }
    }
    for urlEncoded in [false, true] {
        let written = listingXML(page, urlEncoded: urlEncoded)
        let again = ObjectListingXML.page(written)
        fuzzRequire(again == page, "written back (url \(urlEncoded)) as \(String(decoding: written, as: UTF8.self)) "
                    + "reads as \(String(describing: again)), not \(page)")
    }
    let half = ObjectListingXML.page(Array(bytes[..<(bytes.count / 2)]))
    fuzzRequire(half == nil || half == page, "the first half of an answer reads as another page")
    return 0
}

/// `page` as a ListBucketResult; with `urlEncoded`, its keys and prefixes percent-encoded with a space as `+`
/// (rclone's Go QueryEscape), and `<EncodingType>url</EncodingType>` last.
func listingXML(_ page: ObjectListingPage, urlEncoded: Bool) -> [UInt8] {
    func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\r": out += "&#13;"  // a raw CR would read as LF
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
    func key(_ text: String) -> String {
        guard urlEncoded else { return escaped(text) }
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "): out += "+"
            default: out += "%" + String(byte, radix: 16, uppercase: true).leftPadded()
            }
        }
        return out
    }
    var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        + "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    xml += "<IsTruncated>\(page.isTruncated)</IsTruncated>"
    if let prefix = page.prefix { xml += "<Prefix>\(key(prefix))</Prefix>" }
    if let delimiter = page.delimiter { xml += "<Delimiter>\(key(delimiter))</Delimiter>" }
    if let startAfter = page.startAfter { xml += "<StartAfter>\(key(startAfter))</StartAfter>" }
    if let token = page.continuationToken { xml += "<ContinuationToken>\(escaped(token))</ContinuationToken>" }
    for object in page.objects {
        xml += "<Contents>\n  <Key>\(key(object.key))</Key>"
        if let date = object.lastModified { xml += "<LastModified>\(escaped(date))</LastModified>" }
        if let etag = object.etag { xml += "<ETag>&quot;\(escaped(etag))&quot;</ETag>" }
        if let size = object.size { xml += "<Size>\(size)</Size>" }
        xml += "<StorageClass>STANDARD</StorageClass></Contents>"
    }
    for prefix in page.commonPrefixes { xml += "<CommonPrefixes><Prefix>\(key(prefix))</Prefix></CommonPrefixes>" }
    if let token = page.nextContinuationToken {
        xml += "<NextContinuationToken>\(escaped(token))</NextContinuationToken>"
    }
    if urlEncoded { xml += "<EncodingType>url</EncodingType>" }
    return Array((xml + "</ListBucketResult>").utf8)
}

extension String {
    /// A one-digit hex number with its leading zero.
    func leftPadded() -> String { count < 2 ? "0" + self : self }
}
