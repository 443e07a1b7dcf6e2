// The properties the TOML reader's fuzz target checks (Fuzz/TOMLFuzz), in one place that
// both it and `swift test` (Fuzz/Replay, over Fuzz/toml-corpus) call. scripts/fuzz compiles
// this file with the TOML module's own sources, by path; the Swift test imports TOML.
// Properties:
// - the reader never crashes or hangs on any bytes;
// - an error names a place in the document: a line from 1 to the number of lines, a
//   column from 1;
// - reading is deterministic, and bytes that are UTF-8 read the same as bytes and as text.
#if canImport(TOML)
import TOML
#endif

/// The outcome as text, in the document's key order: tables compare by this form, where
/// `nan` equals `nan` (TOMLValue's == follows Double's, where nan never equals itself).
func tomlOutcome(_ parse: () throws(TOMLError) -> TOMLTable) -> Result<String, TOMLError> {
    do throws(TOMLError) {
        return .success(canonical(try parse()))
    } catch {
        return .failure(error)
    }
}

func canonical(_ table: TOMLTable) -> String {
    "{" + table.keys.map { key in "\(key.debugDescription)=" + (table[key].map(canonical) ?? "?") }.joined(separator: ",") + "}"
}

func canonical(_ value: TOMLValue) -> String {
    if let s = value.string { return "s" + s.debugDescription }
    if let i = value.int { return "i\(i)" }
    if let d = value.double { return d.isNaN ? "nan" : "d\(d)" }
    if let b = value.bool { return "b\(b)" }
    if let t = value.dateTime { return "t" + t }
    if let a = value.array { return "[" + a.map(canonical).joined(separator: ",") + "]" }
    if let t = value.table { return canonical(t) }
    return "?"
}

/// What is wrong with how the reader reads `bytes`, or nil when every property holds.
func tomlInputProblem(_ bytes: [UInt8]) -> String? {
    let first = tomlOutcome { () throws(TOMLError) in try TOMLTable(parsingUTF8: bytes) }
    if case .failure(let error) = first {
        let lines = bytes.reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
        guard error.line >= 1, error.line <= lines, error.column >= 1 else {
            return "an error names no place in the document: line \(error.line), column \(error.column) of \(lines) lines"
        }
    }
    let again = tomlOutcome { () throws(TOMLError) in try TOMLTable(parsingUTF8: bytes) }
    guard first == again else { return "the same bytes read differently twice" }
    if let text = String(validating: bytes, as: UTF8.self) {
        let asText = tomlOutcome { () throws(TOMLError) in try TOMLTable(parsing: text) }
        guard asText == first else { return "UTF-8 read as bytes and as text differ: \(asText) vs \(first)" }
    }
    return nil
}
