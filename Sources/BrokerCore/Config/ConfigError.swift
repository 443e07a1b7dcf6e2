/// A configuration problem: names the file, the key, and what is wrong.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// The dotted key (`providers.corp.issuer`), or nil for the file as a whole.
    public var key: String?
    public var problem: String

    public init(file: String, key: String?, problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    public var description: String {
        if let key { return "\(file): \(key): \(problem)" }
        return "\(file): \(problem)"
    }
}
