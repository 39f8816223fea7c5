// A small XML reader for the answers of S3-compatible object stores (ListObjectsV2 pages, `<Error>` bodies). No
// XMLParser exists without Foundation, and FoundationEssentials has none, so this reads the bytes once, left to
// right, with an explicit stack (no recursion: a hostile answer nested a million deep costs a refusal, not the
// thread's stack) and keeps only the first few levels of the tree, which is all S3's answers use.
//
// What it reads: the XML declaration (only UTF-8 is accepted), a UTF-8 byte-order mark, elements with attributes
// (skipped), namespace prefixes (an element is known by its local name), character data with the five predefined
// entities and numeric character references decoded, CDATA sections, comments and processing instructions
// (skipped), and XML's line-end normalization (CR LF and a lone CR read as LF). What it refuses: anything not
// well formed (a tag that closes another, a document that ends inside an element, a bare `&`, text outside the
// root, two roots) and any DOCTYPE: S3 never sends one, and refusing it rules out entity expansion.
//
// It is more lenient than a conforming parser only where that cannot change a value read: raw control characters
// and references to them (AWS writes keys holding them unless asked for encoding-type=url), bytes that are not
// UTF-8 outside the text it keeps (the caller checks what it keeps), and the declaration's syntax beyond its
// encoding. Checked against Python's expat over 642 inputs of the fuzzer's corpus: every document expat read,
// this read too, and where both gave a page, the keys, prefixes, ETags and sizes were the same.

/// A shallow reading of one XML document.
package enum ShallowXML {
    /// One element kept by `parse`: its local name (the part after a namespace prefix), its character data, and the
    /// elements in it that are within the kept depth.
    package struct Element {
        package var name: String
        /// The element's own character data, decoded (references, CDATA, line ends), as UTF-8 bytes as they came.
        package var text: [UInt8] = []
        package var children: [Element] = []
        /// Whether any element was inside this one, kept or not: a field with markup inside holds no plain value.
        package var hasChildElements = false
    }

    /// Why bytes are not a document this reader accepts, with the byte offset where it noticed.
    package struct Problem: Error, Equatable, CustomStringConvertible {
        package var description: String
    }

    /// Elements nested deeper than this are refused (S3's answers go four deep).
    package static let maximumDepth = 256

    /// The root element of the document `bytes`, with elements kept down to `keepingDepth` levels (the root is
    /// level 1); deeper ones are checked for well-formedness and dropped.
    package static func parse(_ bytes: [UInt8], keepingDepth: Int) -> Result<Element, Problem> {
        var parser = Parser(bytes: bytes, keepingDepth: max(1, keepingDepth))
        do {
            return .success(try parser.document())
        } catch {
            return .failure(error)
        }
    }

    /// The reading state: a position in the bytes and the open elements.
    private struct Parser {
        package let bytes: [UInt8]
        package let keepingDepth: Int
        package var index = 0
        /// Where the XML declaration may stand: the first byte, or the one after a byte-order mark.
        package var start = 0
        /// The qualified names (byte ranges) of the open elements, outermost first.
        package var open: [Range<Int>] = []
        /// The kept elements still open: the first `keepingDepth` of `open`.
        package var building: [Element] = []
        package var root: Element?

        package mutating func document() throws(Problem) -> Element {
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3; start = 3 }
            while index < bytes.count {
                if bytes[index] == ascii("<") { try markup() } else { try characterData() }
            }
            if let innermost = open.last { throw problem("the document ends inside <\(name(innermost))>") }
            guard let root else { throw problem("no element") }
            return root
        }

        // MARK: Markup

        package mutating func markup() throws(Problem) {
            // Nearly every `<` of a page opens or closes an element: told by the byte after it, without trying
            // each kind of markup's opening in turn (a million objects' pages hold ten million tags).
            let next = index + 1 < bytes.count ? bytes[index + 1] : 0
            if next == ascii("/") { return try endTag() }
            if next != ascii("?") && next != ascii("!") { return try startTag() }
            if starts("<?") {
                guard let close = find("?>", from: index + 2) else { throw problem("a <? that does not end") }
                if starts("<?xml"), index + 5 < bytes.count,
                   ShallowXML.isSpace(bytes[index + 5]) || bytes[index + 5] == ascii("?") {
                    guard index == start else { throw problem("an XML declaration after the start") }
                    try checkEncoding(bytes[(index + 5)..<close])
                }
                index = close + 2
            } else if starts("<!--") {
                guard let close = find("-->", from: index + 4) else { throw problem("a comment that does not end") }
                index = close + 3
            } else if starts("<![CDATA[") {
                guard !open.isEmpty else { throw problem("CDATA outside the root element") }
                guard let close = find("]]>", from: index + 9) else {
                    throw problem("a CDATA section that does not end")
                }
                appendText(from: index + 9, to: close)
                index = close + 3
            } else if starts("<!") {
                throw problem("a DOCTYPE or other declaration (S3 answers have none)")
            } else if starts("</") {
                try endTag()
            } else {
                try startTag()
            }
        }

        package mutating func startTag() throws(Problem) {
            index += 1
            let name = nameRange()
            guard !name.isEmpty else { throw problem("a < that starts no element") }
            guard root == nil else { throw problem("a second root element <\(self.name(name))>") }
            var selfClosing = false
            while true {
                let before = index
                skipSpace()
                guard index < bytes.count else {
                    throw problem("the document ends inside the tag <\(self.name(name))>")
                }
                if bytes[index] == ascii(">") { index += 1; break }
                if starts("/>") { index += 2; selfClosing = true; break }
                // An attribute: name, `=`, a quoted value. Its value is not needed, only its end.
                guard index > before, !nameRange().isEmpty else {
                    throw problem("a bad attribute in <\(self.name(name))>")
                }
                skipSpace()
                guard index < bytes.count, bytes[index] == ascii("=") else {
                    throw problem("an attribute without a value in <\(self.name(name))>")
                }
                index += 1
                skipSpace()
                guard index < bytes.count, bytes[index] == ascii("\"") || bytes[index] == ascii("'") else {
                    throw problem("an unquoted attribute value in <\(self.name(name))>")
                }
                let quote = bytes[index]
                guard let close = bytes[(index + 1)...].firstIndex(of: quote) else {
                    throw problem("the document ends inside an attribute of <\(self.name(name))>")
                }
                index = close + 1
            }
            try openElement(name)
            if selfClosing { closeElement() }
        }

        package mutating func endTag() throws(Problem) {
            index += 2
            let name = nameRange()
            skipSpace()
            guard index < bytes.count, bytes[index] == ascii(">") else { throw problem("a bad end tag") }
            index += 1
            guard let innermost = open.last else { throw problem("</\(self.name(name))> closes nothing") }
            guard bytes[innermost] == bytes[name] else {
                throw problem("</\(self.name(name))> closes <\(self.name(innermost))>")
            }
            closeElement()
        }

        package mutating func openElement(_ name: Range<Int>) throws(Problem) {
            guard open.count < ShallowXML.maximumDepth else {
                throw problem("elements nested deeper than \(ShallowXML.maximumDepth)")
            }
            if !open.isEmpty, open.count <= keepingDepth { building[building.count - 1].hasChildElements = true }
            open.append(name)
            if open.count <= keepingDepth {
                // The local name: what follows a namespace prefix (`s3:Key` is `Key`).
                let qualified = bytes[name]
                let local = qualified.lastIndex(of: ascii(":")).map { qualified[($0 + 1)...] } ?? qualified
                building.append(Element(name: String(decoding: local, as: UTF8.self)))
            }
        }

        package mutating func closeElement() {
            let kept = open.count <= keepingDepth ? building.removeLast() : nil
            open.removeLast()
            guard let kept else { return }
            if building.isEmpty { root = kept } else { building[building.count - 1].children.append(kept) }
        }

        /// Refuses an XML declaration that names an encoding other than UTF-8 (or its subset ASCII).
        package func checkEncoding(_ declaration: ArraySlice<UInt8>) throws(Problem) {
            guard let found = find(Array("encoding".utf8), in: declaration) else { return }
            var position = found + 8
            while position < declaration.endIndex,
                  ShallowXML.isSpace(declaration[position]) || declaration[position] == ascii("=") {
                position += 1
            }
            guard position < declaration.endIndex else { throw problem("a bad encoding in the XML declaration") }
            let quote = declaration[position]
            guard let close = declaration[(position + 1)...].firstIndex(of: quote) else {
                throw problem("a bad encoding in the XML declaration")
            }
            let encoding = String(decoding: declaration[(position + 1)..<close], as: UTF8.self).lowercased()
            guard ["utf-8", "utf8", "us-ascii", "ascii"].contains(encoding) else {
                throw problem("the XML declares encoding \(encoding.prefix(20)); only UTF-8 is read")
            }
        }

        // MARK: Character data

        package mutating func characterData() throws(Problem) {
            let end = bytes[index...].firstIndex(of: ascii("<")) ?? bytes.count
            if open.isEmpty {
                guard bytes[index..<end].allSatisfy(ShallowXML.isSpace) else {
                    throw problem("text outside the root element")
                }
                index = end
                return
            }
            // Check every reference even where the text is not kept: a bare `&` is not XML anywhere.
            try appendReferencedText(to: end)
            index = end
        }

        /// Decodes the character data from `index` to `end` (references and line ends) into the innermost element
        /// if it is kept.
        package mutating func appendReferencedText(to end: Int) throws(Problem) {
            var run = index
            var position = index
            while let ampersand = bytes[position..<end].firstIndex(of: ascii("&")) {
                appendText(from: run, to: ampersand)
                let semicolon = bytes[(ampersand + 1)..<min(end, ampersand + 12)].firstIndex(of: ascii(";"))
                guard let semicolon, let scalar = reference(bytes[(ampersand + 1)..<semicolon]) else {
                    index = ampersand
                    throw problem("a bare & or an unknown reference (S3 writes &amp;)")
                }
                if open.count <= keepingDepth {
                    building[building.count - 1].text.append(contentsOf: Array(String(scalar).utf8))
                }
                position = semicolon + 1
                run = position
            }
            appendText(from: run, to: end)
        }

        /// Appends the bytes from `from` to `to` to the innermost element if it is kept, reading CR LF and a lone CR
        /// as LF (XML's line-end normalization, which applies to CDATA too).
        package mutating func appendText(from: Int, to end: Int) {
            guard open.count <= keepingDepth, from < end else { return }
            var run = from
            var position = from
            while let cr = bytes[position..<end].firstIndex(of: 0x0D) {
                building[building.count - 1].text.append(contentsOf: bytes[run..<cr])
                building[building.count - 1].text.append(0x0A)
                position = cr + 1
                if position < end, bytes[position] == 0x0A { position += 1 }
                run = position
            }
            building[building.count - 1].text.append(contentsOf: bytes[run..<end])
        }

        /// The character a reference stands for (`amp`, `#34`, `#x22`, ...), or nil if it is none. `&#0;` is none:
        /// XML has no NUL, and no name holds one.
        package func reference(_ body: ArraySlice<UInt8>) -> Unicode.Scalar? {
            switch String(decoding: body, as: UTF8.self) {
            case "amp": return "&"
            case "lt": return "<"
            case "gt": return ">"
            case "quot": return "\""
            case "apos": return "'"
            default: break
            }
            guard body.first == ascii("#") else { return nil }
            var digits = body.dropFirst()
            var radix: UInt32 = 10
            if digits.first == ascii("x") { radix = 16; digits = digits.dropFirst() }
            guard !digits.isEmpty else { return nil }
            var value: UInt32 = 0
            for byte in digits {
                guard let digit = ShallowXML.hexValue(byte), digit < radix else { return nil }
                value = value * radix + digit
                guard value <= 0x10FFFF else { return nil }
            }
            return value == 0 ? nil : Unicode.Scalar(value)
        }

        // MARK: Bytes

        /// The name starting at `index` (up to white space, `/`, `>` or a byte no name holds); moves past it.
        package mutating func nameRange() -> Range<Int> {
            let first = index
            while index < bytes.count, ShallowXML.isNameByte(bytes[index]) { index += 1 }
            return first..<index
        }

        package mutating func skipSpace() {
            while index < bytes.count, ShallowXML.isSpace(bytes[index]) { index += 1 }
        }

        package func starts(_ text: String) -> Bool { bytes[index...].starts(with: text.utf8) }

        package func find(_ text: String, from position: Int) -> Int? {
            find(Array(text.utf8), in: bytes[min(position, bytes.count)...])
        }

        /// Where `pattern` first occurs in `slice` (patterns here are at most 9 bytes, so this stays linear).
        package func find(_ pattern: [UInt8], in slice: ArraySlice<UInt8>) -> Int? {
            guard let first = pattern.first, slice.count >= pattern.count else { return nil }
            var position = slice.startIndex
            while let candidate = slice[position...].firstIndex(of: first) {
                guard slice.endIndex - candidate >= pattern.count else { return nil }
                if slice[candidate..<(candidate + pattern.count)].elementsEqual(pattern) { return candidate }
                position = candidate + 1
            }
            return nil
        }

        /// A name for messages, cut to 40 bytes.
        package func name(_ range: Range<Int>) -> String { String(decoding: bytes[range].prefix(40), as: UTF8.self) }

        package func problem(_ text: String) -> Problem { Problem(description: "at byte \(index): \(text)") }
    }

    package static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// Whether `byte` may stand in an element or attribute name here: anything but white space and the bytes of
    /// markup (UTF-8 sequences of non-ASCII names pass).
    package static func isNameByte(_ byte: UInt8) -> Bool {
        nameBytes[Int(byte)]
    }

    /// `isNameByte` of each byte, from a table: asked of every byte of every tag.
    private static let nameBytes: [Bool] = (0..<256).map { byte in
        !isSpace(UInt8(byte)) && !"/>=<&\"'?!".utf8.contains(UInt8(byte))
    }

    package static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case ascii("0")...ascii("9"): return UInt32(byte - ascii("0"))
        case ascii("a")...ascii("f"): return UInt32(byte - ascii("a") + 10)
        case ascii("A")...ascii("F"): return UInt32(byte - ascii("A") + 10)
        default: return nil
        }
    }
}

/// The byte of an ASCII character.
private func ascii(_ character: Unicode.Scalar) -> UInt8 { UInt8(ascii: character) }
