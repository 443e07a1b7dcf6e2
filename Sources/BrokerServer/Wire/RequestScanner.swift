import BrokerProtocol

/// A JSON value as the request scanner keeps it: the shapes requests use, and `other` for
/// anything else (valid JSON the fast path does not interpret).
enum ScannedValue: Equatable {
    case string(String)
    case int(Int64)
    case null
    case strings([String])
    case other
}

/// A request read in one pass, without Foundation's JSONDecoder: `{"jsonrpc":"2.0","id":1,
/// "method":"token.get","params":{…}}` as every client sends it.
///
/// The fast path only. `scan` returns nil for anything it is not sure to read exactly as
/// JSONDecoder would — escapes it does not know, non-ASCII text, duplicate members, numbers
/// that are not plain integers, objects with more than `maximumMembers` members (so the
/// duplicate check stays linear in the line), invalid JSON of any kind — and the request then takes the
/// JSONDecoder path, which gives the same answers and error messages as before. A profile
/// (docs/performance.md) showed decoding each line twice with JSONDecoder as the largest
/// cost of a cache hit.
struct ScannedRequest {
    var jsonrpc: String?
    var id: RequestID?
    var hasID = false
    /// Where the id's value lies in the line (its first byte to one past its last): the rest
    /// of the line is what the answer depends on (`AnswerMemo`).
    var idRange: Range<Int>?
    var method: String?
    /// nil when the request has no `params` or `params` is null.
    var params: [(key: String, value: ScannedValue)]?

    /// The member `key` of params; nil when params or the member is absent.
    func param(_ key: String) -> ScannedValue? {
        params?.first(where: { $0.key == key })?.value
    }

    /// The most members of one object the scanner reads. Requests have a handful; a line with
    /// thousands (a 64 KiB line holds 6 400) goes to JSONDecoder, instead of costing
    /// members² comparisons in the duplicate check on the event loop.
    static let maximumMembers = 32

    static func scan(_ bytes: UnsafeRawBufferPointer) -> ScannedRequest? {
        var s = Scanner(bytes: bytes)
        var request = ScannedRequest()
        // Room for the usual members at once: growing one by one reallocated twice per request.
        var seen: [ScannedKey] = []
        seen.reserveCapacity(8)
        guard s.object({ key, s in
            guard seen.count < maximumMembers, !seen.contains(key) else { return false }
            seen.append(key)
            switch key {
            case "jsonrpc":
                guard let v = s.value(), v != .other else { return false }
                if case .string(let text) = v { request.jsonrpc = text }
            case "id":
                request.hasID = true
                s.skipSpace()
                let start = s.index
                defer { request.idRange = start..<s.index }
                switch s.value() {
                case .int(let n)?: request.id = .number(n)
                case .string(let text)?: request.id = .string(text)
                case .null?: request.id = .null
                default: return false
                }
            case "method":
                guard let v = s.value(), v != .other else { return false }
                if case .string(let text) = v { request.method = text }
            case "params":
                s.skipSpace()
                if s.peek == UInt8(ascii: "n") {
                    guard s.value() == .null else { return false }
                    return true
                }
                var members: [(key: String, value: ScannedValue)] = []
                members.reserveCapacity(4)
                guard s.object({ key, s in
                    guard members.count < maximumMembers, !members.contains(where: { key == $0.key }) else { return false }
                    // `login.answer`'s value may be a password: never made a String here
                    // (its heap copy would outlive the request); `SecretAnswer` reads it.
                    if key == "value" {
                        guard s.skipString() else { return false }
                        members.append((key.string, .other))
                        return true
                    }
                    guard let v = s.value() else { return false }
                    members.append((key.string, v))
                    return true
                }) else { return false }
                request.params = members
            default:
                guard s.value() != nil else { return false }
            }
            return true
        }) else { return nil }
        s.skipSpace()
        guard s.atEnd else { return nil }
        return request
    }
}

/// A member name as it lies in the line (ASCII, no escapes: what `Scanner.string()` reads),
/// compared there without making a String of it. Valid only while the line's bytes are.
struct ScannedKey: Equatable {
    let bytes: UnsafeRawBufferPointer

    static func == (a: ScannedKey, b: ScannedKey) -> Bool {
        a.bytes.count == b.bytes.count && a.bytes.elementsEqual(b.bytes)
    }

    static func == (a: ScannedKey, name: StaticString) -> Bool {
        a.bytes.count == name.utf8CodeUnitCount
            && a.bytes.elementsEqual(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    static func == (a: ScannedKey, name: String) -> Bool {
        var name = name
        return name.withUTF8 { a == ScannedKey(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// `switch key { case "jsonrpc": … }`.
    static func ~= (name: StaticString, key: ScannedKey) -> Bool { key == name }

    /// The name as a String, for what outlives the line (the params' member names).
    var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// A strict reader of the JSON subset above over raw bytes.
private struct Scanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8 { index < bytes.count ? bytes[index] : 0 }

    mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
            index += 1
        }
    }

    mutating func expect(_ byte: UInt8) -> Bool {
        skipSpace()
        guard peek == byte else { return false }
        index += 1
        return true
    }

    /// `{ "key": value, … }`, calling `member` with the scanner positioned before each value.
    mutating func object(_ member: (ScannedKey, inout Scanner) -> Bool) -> Bool {
        guard expect(UInt8(ascii: "{")) else { return false }
        if expect(UInt8(ascii: "}")) { return true }
        while true {
            skipSpace()
            guard let key = stringBytes(), expect(UInt8(ascii: ":")), member(ScannedKey(bytes: key), &self) else { return false }
            if expect(UInt8(ascii: ",")) { continue }
            return expect(UInt8(ascii: "}"))
        }
    }

    /// A string without escapes and in ASCII (what requests hold); nil for anything else.
    mutating func string() -> String? {
        stringBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes between the quotes of a string `string()` reads, where they lie.
    mutating func stringBytes() -> UnsafeRawBufferPointer? {
        guard peek == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var i = start
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                index = i + 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<i])
            }
            // Escapes, control characters and non-ASCII go to JSONDecoder.
            guard b >= 0x20, b < 0x80, b != UInt8(ascii: "\\") else { return nil }
            i += 1
        }
        return nil
    }

    /// Steps over a string of the subset `string()` reads, without copying it out.
    mutating func skipString() -> Bool {
        skipSpace()
        guard peek == UInt8(ascii: "\"") else { return false }
        var i = index + 1
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                index = i + 1
                return true
            }
            guard b >= 0x20, b < 0x80, b != UInt8(ascii: "\\") else { return false }
            i += 1
        }
        return false
    }

    /// Any JSON value; nil when it is not valid (or not within the subset for strings).
    mutating func value(depth: Int = 0) -> ScannedValue? {
        skipSpace()
        switch peek {
        case UInt8(ascii: "\""):
            return string().map { .string($0) }
        case UInt8(ascii: "n"):
            return literal("null") ? .null : nil
        case UInt8(ascii: "t"):
            return literal("true") ? .other : nil
        case UInt8(ascii: "f"):
            return literal("false") ? .other : nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return number()
        case UInt8(ascii: "["):
            guard depth < 16 else { return nil }
            index += 1
            var strings: [String] = []
            var onlyStrings = true
            if expect(UInt8(ascii: "]")) { return .strings([]) }
            while true {
                guard let v = value(depth: depth + 1) else { return nil }
                if case .string(let text) = v { strings.append(text) } else { onlyStrings = false }
                if expect(UInt8(ascii: ",")) { continue }
                guard expect(UInt8(ascii: "]")) else { return nil }
                return onlyStrings ? .strings(strings) : .other
            }
        case UInt8(ascii: "{"):
            guard depth < 16 else { return nil }
            var keys: [ScannedKey] = []
            let ok = object { key, s in
                guard keys.count < ScannedRequest.maximumMembers, !keys.contains(key) else { return false }
                keys.append(key)
                return s.value(depth: depth + 1) != nil
            }
            return ok ? .other : nil
        default:
            return nil
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for k in 0..<count where bytes[index + k] != word.utf8Start[k] { return false }
        index += count
        return true
    }

    /// An integer that fits Int64 as `.int`; a valid number of another form as `.other`.
    private mutating func number() -> ScannedValue? {
        let start = index
        if peek == UInt8(ascii: "-") { index += 1 }
        let digitsStart = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        let digits = index - digitsStart
        guard digits > 0, !(digits > 1 && bytes[digitsStart] == UInt8(ascii: "0")) else { return nil }
        var integral = true
        if peek == UInt8(ascii: ".") {
            integral = false
            index += 1
            let f = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > f else { return nil }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            integral = false
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            let e = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > e else { return nil }
        }
        guard integral, digits <= 18 else { return .other }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return Int64(text).map { .int($0) } ?? .other
    }
}

extension TokenGetParams {
    /// The params of a scanned `token.get`, or nil when a member has a type JSONDecoder
    /// would refuse (the request then takes the JSONDecoder path and its error message).
    init?(scanned request: ScannedRequest) {
        self.init()
        guard let members = request.params else { return }
        for (key, value) in members {
            switch (key, value) {
            case ("resource", .string(let v)): resource = v
            case ("provider", .string(let v)): provider = v
            case ("account", .string(let v)): account = v
            case ("scopes", .strings(let v)): scopes = v
            case ("min_ttl", .int(let v)):
                guard let n = Int(exactly: v) else { return nil }
                minTTL = n
            case ("wait_for_sign_in", .int(let v)):
                guard let n = Int(exactly: v) else { return nil }
                waitForSignIn = n
            case ("account_hint", .string(let v)): accountHint = v
            case ("params", .null), ("context", .null), ("account_hint", .null):
                continue
            case ("params", _), ("context", _), ("account_hint", _):
                return nil  // an object of strings (or a mistake): JSONDecoder reads it
            case ("resource", .null), ("provider", .null), ("account", .null), ("scopes", .null), ("min_ttl", .null), ("wait_for_sign_in", .null):
                continue
            case ("resource", _), ("provider", _), ("account", _), ("scopes", _), ("min_ttl", _), ("wait_for_sign_in", _):
                return nil
            default:
                continue  // JSONDecoder ignores members it does not know, and so does this
            }
        }
    }
}
