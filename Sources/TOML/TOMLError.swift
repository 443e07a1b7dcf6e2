/// Why a TOML document could not be read, and where.
///
/// The message names the place (line and column, both counted from 1; a column counts
/// Unicode scalars, so a tab is one column) and, where it helps, the key. It never quotes
/// the text of a value: a configuration line may hold a client secret.
public struct TOMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The line of the problem, from 1.
    public var line: Int
    /// The column of the problem within its line, from 1.
    public var column: Int
    /// What is wrong and what to do, without the position: "a string is not closed: …".
    public var reason: String

    public init(line: Int, column: Int, reason: String) {
        self.line = line
        self.column = column
        self.reason = reason
    }

    /// One sentence: "line 4, column 12: a string is not closed: …".
    public var description: String {
        "line \(line), column \(column): \(reason)"
    }
}
