/// The code drawn in a terminal with Unicode half blocks: one character cell holds two
/// modules, one above the other.
extension QRCode {
    /// The light border the standard asks for around the code, in modules.
    public static let quietZone = 4

    /// Character cells a side of ``terminalLines()`` takes: columns, then lines.
    public var terminalSize: (columns: Int, lines: Int) {
        let side = size + 2 * Self.quietZone
        return (side, (side + 1) / 2)
    }

    /// The lines that draw the code, quiet zone included, dark on light whatever the
    /// terminal's own colours: each line sets a black background and bright white
    /// foreground, draws the light modules as blocks (`█` both, `▀` upper, `▄` lower) and
    /// resets the colours at its end. A phone reads dark-on-light codes; many do not read
    /// inverted ones, which is what plain blocks give on a dark terminal.
    public func terminalLines() -> [String] {
        let q = Self.quietZone
        let (side, lines) = terminalSize
        return (0..<lines).map { line in
            var text = "\u{1B}[40;97m"
            for column in 0..<side {
                let upper = !isDark(x: column - q, y: 2 * line - q)
                let lower = !isDark(x: column - q, y: 2 * line + 1 - q)  // below the last row: light
                let cell: String = switch (upper, lower) {
                case (true, true): "\u{2588}"
                case (true, false): "\u{2580}"
                case (false, true): "\u{2584}"
                case (false, false): " "
                }
                text += cell
            }
            return text + "\u{1B}[0m"
        }
    }
}
