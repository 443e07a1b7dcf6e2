/// A configuration problem: names the file, the key, and what is wrong.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// The dotted key (`providers.corp.issuer`), or nil for the file as a whole.
    public var key: String?
    public var problem: String
    /// The `errno` of a file that could not be read, for a caller that knows more about why
    /// (the confined daemon's reload); nil for a file that was read.
    public var systemError: Int32?

    public init(file: String, key: String?, problem: String, systemError: Int32? = nil) {
        self.file = file
        self.key = key
        self.problem = problem
        self.systemError = systemError
    }

    public var description: String {
        if let key { return "\(file): \(key): \(problem)" }
        return "\(file): \(problem)"
    }
}
