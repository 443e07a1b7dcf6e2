/// Booleans, integers, floats and date-times: read as one token, then checked against
/// TOML 1.0's grammar. Messages never quote the token: it may be a secret.
extension TOMLParser {
    private static let notAValue = "the value is not valid TOML: put strings in quotes, and write numbers like 42 or 1.5, booleans as true or false"

    /// A value that is not a string, array or inline table.
    mutating func scalar() throws(Failure) -> TOMLValue {
        let at = i
        while let b = byte, Self.isTokenByte(b) { i += 1 }
        // A date, a space, then a time: one local or offset date-time.
        if i - at == 10, Self.isDate(bytes[at..<i]), byte == UInt8(ascii: " "),
           let h1 = peek(1), let h2 = peek(2), Self.isDigit(h1), Self.isDigit(h2), peek(3) == UInt8(ascii: ":") {
            i += 1
            while let b = byte, Self.isTokenByte(b) { i += 1 }
        }
        let token = bytes[at..<i]
        guard !token.isEmpty else { throw Failure(reason: Self.notAValue, offset: at) }
        if token.elementsEqual("true".utf8) { return .boolean(true) }
        if token.elementsEqual("false".utf8) { return .boolean(false) }
        if Self.isDate(token) || Self.isTime(token) {
            try Self.checkDateTime(token, at: at)
            return .dateTime(String(decoding: token, as: UTF8.self))
        }
        var unsigned = token
        var negative = false
        if let sign = token.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            negative = sign == UInt8(ascii: "-")
            unsigned = token.dropFirst()
        }
        if unsigned.elementsEqual("inf".utf8) { return .float(negative ? -.infinity : .infinity) }
        if unsigned.elementsEqual("nan".utf8) { return .float(negative ? -.nan : .nan) }
        guard let first = unsigned.first, Self.isDigit(first) else { throw Failure(reason: Self.notAValue, offset: at) }
        if unsigned.count >= 2, first == UInt8(ascii: "0"), let radix = Self.radix(unsigned[unsigned.startIndex + 1]) {
            guard unsigned.count == token.count else {
                throw Failure(reason: "a hexadecimal, octal or binary integer cannot have a sign", offset: at)
            }
            return .integer(try Self.digits(unsigned.dropFirst(2), radix: radix, negative: false, at: at))
        }
        if unsigned.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            return .float(try Self.float(token, at: at))
        }
        let integer = try Self.digits(unsigned, radix: 10, negative: negative, at: at)
        try Self.checkNoLeadingZero(unsigned, at: at)
        return .integer(integer)
    }

    /// Bytes that can belong to a number, boolean or date-time.
    private static func isTokenByte(_ b: UInt8) -> Bool {
        isBareKeyByte(b) || b == UInt8(ascii: "+") || b == UInt8(ascii: ".") || b == UInt8(ascii: ":")
    }

    private static func radix(_ b: UInt8) -> Int? {
        switch b {
        case UInt8(ascii: "x"): 16
        case UInt8(ascii: "o"): 8
        case UInt8(ascii: "b"): 2
        default: nil
        }
    }

    // MARK: - Numbers

    /// A decimal integer part may be 0 but not start with 0.
    private static func checkNoLeadingZero(_ digits: ArraySlice<UInt8>, at: Int) throws(Failure) {
        if digits.first == UInt8(ascii: "0"), digits.count > 1 {
            throw Failure(reason: "a decimal number cannot start with 0: remove the leading zeros (0o is the octal prefix)", offset: at)
        }
    }

    /// Digits with single underscores between them, in `radix`, as a 64-bit integer.
    private static func digits(_ text: ArraySlice<UInt8>, radix: Int, negative: Bool, at: Int) throws(Failure) -> Int {
        var value = 0
        var afterDigit = false
        for b in text {
            if b == UInt8(ascii: "_") {
                guard afterDigit else { throw underscore(at) }
                afterDigit = false
                continue
            }
            guard let d = hexValue(b).map(Int.init), d < radix else {
                throw Failure(reason: radix == 10 ? notAValue : "an integer holds a digit its base (0x, 0o or 0b) does not have", offset: at)
            }
            let (shifted, o1) = value.multipliedReportingOverflow(by: radix)
            let (next, o2) = negative ? shifted.subtractingReportingOverflow(d) : shifted.addingReportingOverflow(d)
            guard !o1, !o2 else {
                throw Failure(reason: "an integer does not fit in 64 bits (-9223372036854775808 to 9223372036854775807)", offset: at)
            }
            value = next
            afterDigit = true
        }
        guard afterDigit else { throw text.isEmpty ? Failure(reason: notAValue, offset: at) : underscore(at) }
        return value
    }

    private static func underscore(_ at: Int) -> Failure {
        Failure(reason: "an underscore in a number must stand between two digits", offset: at)
    }

    /// `[+-] int ( .digits [exp] | exp )`, exp = `e [+-] digits`; underscores between digits.
    private static func float(_ token: ArraySlice<UInt8>, at: Int) throws(Failure) -> Double {
        let invalid = Failure(reason: "a float is not valid: write digits on both sides of the point and after the e, e.g. 0.5 or 6.02e23", offset: at)
        var k = token.startIndex
        let end = token.endIndex
        /// Skips a run of digits and underscores; checks the underscores.
        func run() throws(Failure) -> ArraySlice<UInt8> {
            let from = k
            while k < end, isDigit(token[k]) || token[k] == UInt8(ascii: "_") { k += 1 }
            let part = token[from..<k]
            guard let first = part.first, let last = part.last else { throw invalid }
            guard isDigit(first), isDigit(last), !part.indices.dropLast().contains(where: { part[$0] == UInt8(ascii: "_") && part[$0 + 1] == UInt8(ascii: "_") }) else {
                throw underscore(at)
            }
            return part
        }
        if token[k] == UInt8(ascii: "+") || token[k] == UInt8(ascii: "-") { k += 1 }
        try checkNoLeadingZero(try run(), at: at)
        var fraction = false
        if k < end, token[k] == UInt8(ascii: ".") {
            k += 1
            _ = try run()
            fraction = true
        }
        if k < end, token[k] == UInt8(ascii: "e") || token[k] == UInt8(ascii: "E") {
            k += 1
            if k < end, token[k] == UInt8(ascii: "+") || token[k] == UInt8(ascii: "-") { k += 1 }
            _ = try run()
            fraction = true
        }
        guard k == end, fraction else { throw invalid }
        let text = String(decoding: token.filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
        guard let value = Double(text) else { throw invalid }
        guard value.isFinite else {
            throw Failure(reason: "a float is too large for 64 bits", offset: at)
        }
        return value
    }

    // MARK: - Dates and times

    /// Starts `YYYY-`.
    private static func isDate(_ t: ArraySlice<UInt8>) -> Bool {
        let s = t.startIndex
        return t.count >= 5 && t[s..<s + 4].allSatisfy(isDigit) && t[s + 4] == UInt8(ascii: "-")
    }

    /// Starts `HH:`.
    private static func isTime(_ t: ArraySlice<UInt8>) -> Bool {
        let s = t.startIndex
        return t.count >= 3 && isDigit(t[s]) && isDigit(t[s + 1]) && t[s + 2] == UInt8(ascii: ":")
    }

    /// An offset date-time, local date-time, local date or local time (RFC 3339, with
    /// TOML's space or lowercase t between date and time, and seconds required).
    private static func checkDateTime(_ token: ArraySlice<UInt8>, at: Int) throws(Failure) {
        var cursor = DateCursor(text: token, k: token.startIndex)
        guard let valid = cursor.dateTime(), valid else {
            throw Failure(reason: "a date or time is not valid: write it as in RFC 3339, e.g. 1979-05-27T07:32:00Z, 1979-05-27T07:32:00, 1979-05-27 or 07:32:00", offset: at)
        }
    }
}

/// Reads a date-time's parts in order. `dateTime()` is nil when the shape is wrong and
/// false when a part is out of range.
private struct DateCursor {
    let text: ArraySlice<UInt8>
    var k: Int

    mutating func dateTime() -> Bool? {
        let isTimeOnly = text.count > 2 && text[text.startIndex + 2] == UInt8(ascii: ":")
        if isTimeOnly {
            guard let valid = time() else { return nil }
            return k == text.endIndex ? valid : nil
        }
        guard let year = number(4), take("-"), let month = number(2), take("-"), let day = number(2) else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        let dateValid = (1...12).contains(month) && day >= 1 && day <= days[month - 1]
        if k == text.endIndex { return dateValid }
        guard take("T") || take("t") || take(" "), let timeValid = time() else { return nil }
        if k == text.endIndex { return dateValid && timeValid }
        if take("Z") || take("z") {
            return k == text.endIndex ? dateValid && timeValid : nil
        }
        guard take("+") || take("-"), let hours = number(2), take(":"), let minutes = number(2), k == text.endIndex else { return nil }
        return dateValid && timeValid && hours <= 23 && minutes <= 59
    }

    /// `HH:MM:SS[.fraction]`.
    private mutating func time() -> Bool? {
        guard let hour = number(2), take(":"), let minute = number(2), take(":"), let second = number(2) else { return nil }
        if take(".") {
            let from = k
            while k < text.endIndex, TOMLParser.isDigit(text[k]) { k += 1 }
            guard k > from else { return nil }
        }
        // 60 is a leap second, as RFC 3339 allows.
        return hour <= 23 && minute <= 59 && second <= 60
    }

    private mutating func number(_ count: Int) -> Int? {
        guard text.endIndex - k >= count else { return nil }
        var value = 0
        for b in text[k..<k + count] {
            guard TOMLParser.isDigit(b) else { return nil }
            value = value * 10 + Int(b - UInt8(ascii: "0"))
        }
        k += count
        return value
    }

    private mutating func take(_ c: Unicode.Scalar) -> Bool {
        guard k < text.endIndex, text[k] == UInt8(ascii: c) else { return false }
        k += 1
        return true
    }
}
