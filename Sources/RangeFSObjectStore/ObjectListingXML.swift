// What an S3-compatible object store answers to ListObjectsV2 (`GET /bucket?list-type=2`), and the `<Error>` body
// it sends instead when it refuses. The XML is read by `ShallowXML`; this file gives the elements their meaning.
//
// Elements are found by name, never by order: rclone serve s3 writes CommonPrefixes before Contents, moto after,
// and both put EncodingType after the keys it applies to. Unknown elements (Owner, StorageClass, ChecksumAlgorithm,
// KeyCount, ...) are skipped. An ETag comes quoted by AWS (`&quot;`) and moto (raw `"`), unquoted by rclone; it is
// kept without its quotes. With `<EncodingType>url</EncodingType>`, the values that are keys (Contents' Key,
// CommonPrefixes' Prefix, and Prefix, Delimiter and StartAfter) are form-decoded, `+` as a space and then `%XX`:
// AWS and rclone write a space as `+`, moto as `%20`, and all three write `+` as `%2B` (botocore reads them with
// `unquote_plus`). Without it, `+` and `%` in a key are themselves. Continuation tokens are never decoded: they are
// opaque and go back as they came.
//
// A page is read whole or not at all: a document that is not well formed, a key that is not UTF-8, a Contents
// without a Key, a field given twice or an IsTruncated that is neither true nor false refuses the page, so a
// listing is never built from half-read answers.

/// One page of a ListObjectsV2 answer.
package struct ObjectListingPage: Equatable, Sendable {
    /// One listed object.
    package struct Object: Equatable, Sendable {
        package var key: String
        /// nil when the answer gives none, or none a file can have (negative, not a number, past 2^63 - 1).
        package var size: UInt64?
        /// The ETag without its quotes; nil when the answer gives none.
        package var etag: String?
        /// As given, e.g. `2026-11-26T04:08:04.71Z`.
        package var lastModified: String?
    }

    package var objects: [Object] = []
    /// The CommonPrefixes, each ending in the delimiter.
    package var commonPrefixes: [String] = []
    package var isTruncated = false
    package var nextContinuationToken: String?
    /// The token this page was asked with, as the server echoes it (rclone does, moto does not).
    package var continuationToken: String?
    /// The request's prefix, delimiter and start-after, as the server echoes them.
    package var prefix: String?
    package var delimiter: String?
    package var startAfter: String?
}

/// An S3 error answer: `<Error><Code>SignatureDoesNotMatch</Code><Message>...</Message>...</Error>`. Only these
/// fields are kept: AWS's SignatureDoesNotMatch also carries the canonical request and string to sign, which hold
/// the signed headers (a session token among them), and nothing of those may reach a log. Each field is one line
/// of at most 300 printable scalars, the Code of 64 (see `oneLine`).
package struct ObjectStoreErrorBody: Equatable, Sendable {
    package var code: String
    package var message: String?
    /// `BucketName` (AWS, moto).
    package var bucket: String?
    /// `Key` (AWS, moto's NoSuchKey).
    package var key: String?
    /// `Resource`: the key or bucket in rclone's errors.
    package var resource: String?
    /// `Region`: where AWS says the bucket is (AuthorizationHeaderMalformed, PermanentRedirect).
    package var region: String?
}

/// Reads ListObjectsV2 pages and S3 error bodies.
package enum ObjectListingXML {
    /// The page `bytes` holds, or nil if it is not a ListBucketResult this reader accepts (see `read`).
    package static func page(_ bytes: [UInt8]) -> ObjectListingPage? {
        guard case .success(let page) = read(bytes) else { return nil }
        return page
    }

    /// The page `bytes` holds, or why it is none (not XML, truncated, another root such as `<Error>`, a bad field).
    package static func read(_ bytes: [UInt8]) -> Result<ObjectListingPage, ShallowXML.Problem> {
        // Levels: ListBucketResult, Contents, Key.
        switch ShallowXML.parse(bytes, keepingDepth: 3) {
        case .failure(let problem):
            return .failure(problem)
        case .success(let root):
            guard root.name == "ListBucketResult" else {
                let description = "the answer is <\(root.name.prefix(40))>, not a ListBucketResult"
                return .failure(ShallowXML.Problem(description: description))
            }
            do {
                return .success(try page(of: root))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The error `bytes` holds, or nil if it is not an `<Error>` document with a Code.
    package static func error(_ bytes: [UInt8]) -> ObjectStoreErrorBody? {
        guard case .success(let root) = ShallowXML.parse(bytes, keepingDepth: 2), root.name == "Error" else {
            return nil
        }
        var fields: [String: String] = [:]
        for child in root.children where !child.hasChildElements && fields[child.name] == nil {
            // A field that is not UTF-8 is left out; the others still say what went wrong.
            guard let text = String(validating: child.text, as: UTF8.self) else { continue }
            let line = oneLine(text, limit: child.name == "Code" ? codeLimit : fieldLimit)
            if !line.isEmpty { fields[child.name] = line }
        }
        guard let code = fields["Code"] else { return nil }
        return ObjectStoreErrorBody(code: code, message: fields["Message"], bucket: fields["BucketName"],
                                    key: fields["Key"], resource: fields["Resource"], region: fields["Region"])
    }

    /// The error the first bytes of an error body hold, when the rest was not read (`cut`): the fields this reader
    /// keeps, each found whole in `bytes` (a Code and a Message come first in every store's error), read as a
    /// document of their own. A body read whole is read by `error(_:)`.
    package static func error(_ bytes: [UInt8], cut: Bool) -> ObjectStoreErrorBody? {
        guard cut else { return error(bytes) }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let root = text.firstRange(of: "<Error>") else { return nil }
        var document = "<Error>"
        for name in ["Code", "Message", "BucketName", "Key", "Resource", "Region"] {
            guard let open = text[root.upperBound...].firstRange(of: "<\(name)>"),
                  let close = text[open.upperBound...].firstRange(of: "</\(name)>") else { continue }
            document += text[open.lowerBound..<close.upperBound]
        }
        return error(Array((document + "</Error>").utf8))
    }

    // MARK: Fields

    private static func page(of root: ShallowXML.Element) throws(ShallowXML.Problem) -> ObjectListingPage {
        var urlEncoded = false
        if let encoding = root.children.last(where: { $0.name == "EncodingType" }) {
            let value = String(decoding: trimmed(Array(try value(encoding).utf8)[...]), as: UTF8.self)
            guard value.isEmpty || value.lowercased() == "url" else {
                throw fault("EncodingType \(value.prefix(20)) is not url")
            }
            urlEncoded = value.lowercased() == "url"
        }
        var page = ObjectListingPage()
        var seen: Set<String> = []
        for child in root.children {
            switch child.name {
            case "Contents":
                page.objects.append(try object(child, urlEncoded: urlEncoded))
            case "CommonPrefixes":
                for prefix in child.children where prefix.name == "Prefix" {
                    page.commonPrefixes.append(try key(prefix, urlEncoded: urlEncoded))
                }
            case "IsTruncated", "NextContinuationToken", "ContinuationToken", "Prefix", "Delimiter", "StartAfter",
                 "EncodingType":
                guard seen.insert(child.name).inserted else { throw fault("<\(child.name)> given twice") }
                switch child.name {
                case "IsTruncated":
                    switch String(decoding: trimmed(Array(try value(child).utf8)[...]), as: UTF8.self) {
                    case "true", "1": page.isTruncated = true
                    case "false", "0": page.isTruncated = false
                    default: throw fault("IsTruncated is neither true nor false")
                    }
                case "NextContinuationToken": page.nextContinuationToken = try value(child)
                case "ContinuationToken": page.continuationToken = try value(child)
                case "Prefix": page.prefix = try key(child, urlEncoded: urlEncoded)
                case "Delimiter": page.delimiter = try key(child, urlEncoded: urlEncoded)
                case "StartAfter": page.startAfter = try key(child, urlEncoded: urlEncoded)
                default: break
                }
            default:
                continue
            }
        }
        return page
    }

    private static func object(_ contents: ShallowXML.Element, urlEncoded: Bool) throws(ShallowXML.Problem)
        -> ObjectListingPage.Object {
        var key: String?
        var object = ObjectListingPage.Object(key: "")
        // The fields seen, one bit each: a set of strings per object cost an allocation and four hashes.
        var seen: UInt8 = 0
        for child in contents.children {
            let bit: UInt8
            switch child.name {
            case "Key": bit = 1
            case "Size": bit = 2
            case "ETag": bit = 4
            case "LastModified": bit = 8
            default: continue
            }
            guard seen & bit == 0 else { throw fault("<\(child.name)> given twice in one <Contents>") }
            seen |= bit
            switch child.name {
            case "Key":
                key = try self.key(child, urlEncoded: urlEncoded)
            case "Size":
                object.size = size(trimmed(child.text[...]))
            case "ETag":
                var etag = Array(try value(child).utf8)[...]
                // Quotes are ASCII, so the bytes between them are still UTF-8.
                if etag.count >= 2, etag.first == UInt8(ascii: "\""), etag.last == UInt8(ascii: "\"") {
                    etag = etag.dropFirst().dropLast()
                }
                object.etag = etag.isEmpty ? nil : String(decoding: etag, as: UTF8.self)
            default:
                let date = try value(child)
                object.lastModified = date.isEmpty ? nil : date
            }
        }
        guard let key else { throw fault("a <Contents> without <Key>") }
        object.key = key
        return object
    }

    /// The text of a field that holds only text, as UTF-8.
    private static func value(_ element: ShallowXML.Element) throws(ShallowXML.Problem) -> String {
        guard !element.hasChildElements else { throw fault("<\(element.name)> holds elements, not text") }
        guard let text = String(validating: element.text, as: UTF8.self) else {
            throw fault("<\(element.name)> is not UTF-8")
        }
        return text
    }

    /// A key-like field: its text, form-decoded when the page is url-encoded.
    private static func key(_ element: ShallowXML.Element, urlEncoded: Bool) throws(ShallowXML.Problem) -> String {
        guard urlEncoded else { return try value(element) }
        guard !element.hasChildElements else { throw fault("<\(element.name)> holds elements, not text") }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(element.text.count)
        guard PageText.formDecode(element.text[...], into: &decoded) else {
            throw fault("<\(element.name)> holds a % that escapes nothing")
        }
        guard let key = String(validating: decoded, as: UTF8.self) else {
            throw fault("<\(element.name)> is not UTF-8 once url-decoded")
        }
        return key
    }

    /// A size in decimal digits that a file can have (at most 2^63 - 1, what `off_t` holds), or nil.
    private static func size(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))  // 19 digits stay below 2^64
        }
        return value <= UInt64(Int64.max) ? value : nil
    }

    /// The most Unicode scalars an error's Code keeps (AWS's longest code has 39), and any other field (AWS's
    /// messages stay under 200). Counted in scalars, not Characters: a Character may hold any number of
    /// combining marks, so 300 Characters bound nothing.
    package static let codeLimit = 64
    package static let fieldLimit = 300

    /// `text` fit for one line of a message: controls (line ends, tabs, ESC of escape sequences, DEL, C1), line and
    /// paragraph separators, format characters (bidi overrides, which reorder what a terminal shows), and runs of
    /// spaces of any kind become one space; it is cut to at most `limit` scalars, never right after a space (a cut
    /// there ended a 300-character field in the space a control byte left, issue 45 case 13). Error bodies are shown to users and logged, and
    /// the server writes them.
    package static func oneLine(_ text: String, limit: Int = fieldLimit) -> String {
        var line = String.UnicodeScalarView()
        var kept = 0
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            if isUnprintable(scalar) || scalar.properties.generalCategory == .spaceSeparator {
                pendingSpace = kept > 0
                continue
            }
            // A space goes in only with a scalar after it: the line never ends in one.
            guard kept + (pendingSpace ? 2 : 1) <= limit else { break }
            if pendingSpace {
                line.append(" ")
                kept += 1
            }
            pendingSpace = false
            line.append(scalar)
            kept += 1
        }
        return String(line)
    }

    /// Whether `scalar` has no place in one line of a message: a control, a line or paragraph separator, or a
    /// format character.
    package static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// `bytes` without XML white space at either end.
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        guard let first = bytes.firstIndex(where: { !ShallowXML.isSpace($0) }),
              let last = bytes.lastIndex(where: { !ShallowXML.isSpace($0) }) else { return [] }
        return bytes[first...last]
    }

    private static func fault(_ text: String) -> ShallowXML.Problem {
        ShallowXML.Problem(description: "ListBucketResult: \(text)")
    }
}
