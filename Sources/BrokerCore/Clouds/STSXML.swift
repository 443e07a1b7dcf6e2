/// The text of the elements of an AWS Query answer (STS's XML), by path: a small reader
/// for the few answers STS gives, not an XML parser. It knows elements, their text (the
/// five named entities, numeric character references and CDATA), and skips the XML
/// declaration, processing instructions, comments and attributes. Namespace prefixes are
/// dropped (`sts:Credentials` is `Credentials`). Anything it cannot read (a tag that is
/// not closed, a closing tag that does not match, a DOCTYPE) makes it give nothing.
struct STSXML {
    /// Each element's text by its path of names from the root,
    /// `AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials/AccessKeyId`;
    /// for an element met more than once, the first.
    private(set) var texts: [String: String] = [:]

    /// The root element's name.
    private(set) var root: String?

    /// Reads `bytes`; nil when they are not XML this reader takes.
    init?(_ bytes: [UInt8]) {
        var reader = Reader(bytes: bytes)
        guard let texts = reader.read() else { return nil }
        self.texts = texts
        self.root = reader.root
    }

    /// The text of the element at `path` (names joined by "/" from the root).
    subscript(_ path: String) -> String? { texts[path] }

    private struct Reader {
        let bytes: [UInt8]
        var i = 0
        var stack: [String] = []
        var text: [UInt8] = []
        var texts: [String: String] = [:]
        var root: String?

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func read() -> [String: String]? {
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: "<") {
                    guard markup() else { return nil }
                } else {
                    guard let byte = character() else { return nil }
                    if !stack.isEmpty { text.append(contentsOf: byte) }
                }
            }
            return stack.isEmpty && root != nil ? texts : nil
        }

        private func starts(_ prefix: String, at index: Int) -> Bool {
            let p = Array(prefix.utf8)
            return index + p.count <= bytes.count && Array(bytes[index..<index + p.count]) == p
        }

        private func find(_ end: String, from index: Int) -> Int? {
            guard let first = end.utf8.first, index < bytes.count else { return nil }
            var j = index
            while let at = bytes[j...].firstIndex(of: first) {
                if starts(end, at: at) { return at }
                j = at + 1
            }
            return nil
        }

        /// One `<…>`: a tag, a comment, a declaration or CDATA.
        private mutating func markup() -> Bool {
            if starts("<!--", at: i) {
                guard let end = find("-->", from: i + 4) else { return false }
                i = end + 3
            } else if starts("<![CDATA[", at: i) {
                guard let end = find("]]>", from: i + 9), !stack.isEmpty else { return false }
                text.append(contentsOf: bytes[(i + 9)..<end])
                i = end + 3
            } else if starts("<?", at: i) {
                guard let end = find("?>", from: i + 2) else { return false }
                i = end + 2
            } else if starts("<!", at: i) {
                return false  // DOCTYPE and its entities: never in an STS answer
            } else {
                guard let end = find(">", from: i + 1) else { return false }
                let tag = bytes[(i + 1)..<end]
                i = end + 1
                return element(tag)
            }
            return true
        }

        private mutating func element(_ tag: ArraySlice<UInt8>) -> Bool {
            let closing = tag.first == UInt8(ascii: "/")
            let empty = tag.last == UInt8(ascii: "/")
            let body = tag.dropFirst(closing ? 1 : 0).dropLast(empty ? 1 : 0)
            let nameBytes = body.prefix { ![UInt8(ascii: " "), 9, 10, 13].contains($0) }
            guard !nameBytes.isEmpty else { return false }
            var name = String(decoding: nameBytes, as: UTF8.self)
            if let colon = name.lastIndex(of: ":") { name = String(name[name.index(after: colon)...]) }
            if closing {
                guard stack.last == name else { return false }
                let path = stack.joined(separator: "/")
                if texts[path] == nil { texts[path] = String(decoding: text, as: UTF8.self) }
                stack.removeLast()
                text = []
            } else {
                guard root == nil || !stack.isEmpty else { return false }  // one root only
                if root == nil { root = name }
                stack.append(name)
                text = []
                if empty {
                    let path = stack.joined(separator: "/")
                    if texts[path] == nil { texts[path] = "" }
                    stack.removeLast()
                }
            }
            return true
        }

        /// One character of text, its reference decoded.
        private mutating func character() -> [UInt8]? {
            guard bytes[i] == UInt8(ascii: "&") else {
                defer { i += 1 }
                return [bytes[i]]
            }
            guard let end = find(";", from: i + 1), end - i <= 10 else { return nil }
            let name = String(decoding: bytes[(i + 1)..<end], as: UTF8.self)
            i = end + 1
            switch name {
            case "amp": return Array("&".utf8)
            case "lt": return Array("<".utf8)
            case "gt": return Array(">".utf8)
            case "quot": return Array("\"".utf8)
            case "apos": return Array("'".utf8)
            default:
                let value: UInt32?
                if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    value = UInt32(name.dropFirst(2), radix: 16)
                } else if name.hasPrefix("#") {
                    value = UInt32(name.dropFirst(1))
                } else {
                    value = nil
                }
                guard let value, let scalar = Unicode.Scalar(value) else { return nil }
                return Array(String(Character(scalar)).utf8)
            }
        }
    }
}
