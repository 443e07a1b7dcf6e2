/// One value of a TOML document.
///
/// Equality is the values' own: two floats that are NaN are not equal, as with `Double`.
public enum TOMLValue: Sendable, Equatable {
    case string(String)
    /// A 64-bit signed integer (decimal, `0x`, `0o` or `0b` in the file).
    case integer(Int)
    /// An IEEE 754 binary64 float, including `inf` and `nan`.
    case float(Double)
    case boolean(Bool)
    /// An offset date-time, local date-time, local date or local time, as written in the
    /// file (its shape and ranges checked, e.g. `1979-05-27T07:32:00Z`, `07:32:00`).
    case dateTime(String)
    /// An array; TOML 1.0 allows values of different types in one array.
    case array([TOMLValue])
    /// A table: a `[header]` table, an inline table or an element of an array of tables.
    case table(TOMLTable)

    /// The string, or nil for any other kind of value.
    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer, or nil for any other kind of value (a float is not converted).
    public var int: Int? {
        if case .integer(let i) = self { return i }
        return nil
    }

    /// The float, or nil for any other kind of value (an integer is not converted).
    public var double: Double? {
        if case .float(let d) = self { return d }
        return nil
    }

    /// The boolean, or nil for any other kind of value.
    public var bool: Bool? {
        if case .boolean(let b) = self { return b }
        return nil
    }

    /// The date-time's text as written, or nil for any other kind of value.
    public var dateTime: String? {
        if case .dateTime(let d) = self { return d }
        return nil
    }

    /// The array, or nil for any other kind of value. An array of tables is an array.
    public var array: [TOMLValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The table, or nil for any other kind of value.
    public var table: TOMLTable? {
        if case .table(let t) = self { return t }
        return nil
    }

    /// What kind of value this is, for messages: "a string", "an integer", "a table" …
    public var kindDescription: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        case .dateTime: "a date-time"
        case .array: "an array"
        case .table: "a table"
        }
    }
}
