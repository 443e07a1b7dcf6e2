/// A closed set of strings on the wire (docs/protocol.md), as a Swift enum whose raw
/// values are those strings.
///
/// Answers are read leniently: a value this build does not know (a newer daemon's) is kept
/// as `unknown`, so an older client still reads the rest of the answer. Requests are read
/// strictly: `KeyedDecodingContainer.decodeKnownIfPresent` refuses a value outside `known`
/// with an `UnknownWireValue`, which the daemon answers with -32602 naming the member and
/// its choices, without echoing what was sent.
public protocol WireEnum: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible where RawValue == String {
    /// The values this build knows, in the order docs/protocol.md lists them.
    static var known: [Self] { get }
    /// A value this build does not know, kept as it was sent.
    static func unknown(_ value: String) -> Self
}

extension WireEnum {
    /// Never fails: a value outside `known` becomes `unknown(value)`. The standard library's
    /// `Codable` for `RawRepresentable` decodes and encodes through this and `rawValue`.
    public init(rawValue: String) {
        self = Self.known.first { $0.rawValue == rawValue } ?? .unknown(rawValue)
    }

    /// Whether this build knows the value.
    public var isKnown: Bool { Self.known.contains(self) }

    public var description: String { rawValue }

    /// The choices as a sentence fragment: `"browser", "device" or "terminal"`.
    public static var choices: String { UnknownWireValue.list(known.map(\.rawValue)) }
}

/// A request member whose value is outside its closed set: the underlying error of the
/// `DecodingError` that `decodeKnownIfPresent` throws. Holds the choices, never the value.
public struct UnknownWireValue: Error, Sendable, Equatable {
    /// The allowed values, in order.
    public var choices: [String]

    public init(choices: [String]) { self.choices = choices }

    /// `must be "a", "b" or "c"`.
    public var requirement: String { "must be \(Self.list(choices))" }

    static func list(_ values: [String]) -> String {
        let quoted = values.map { "\"\($0)\"" }
        guard let last = quoted.last, quoted.count > 1 else { return quoted.first ?? "" }
        return quoted.dropLast().joined(separator: ", ") + " or " + last
    }
}

extension KeyedDecodingContainer {
    /// Decodes a request member of a closed set, refusing a value this build does not know.
    public func decodeKnownIfPresent<T: WireEnum>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = try decodeIfPresent(T.self, forKey: key) else { return nil }
        guard value.isKnown else {
            let refusal = UnknownWireValue(choices: T.known.map(\.rawValue))
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: codingPath + [key], debugDescription: refusal.requirement, underlyingError: refusal))
        }
        return value
    }
}
