import QREncoder
import XCTest

/// What a scanner needs to find a code, checked without decoding it: the size of a known
/// version, the three finder patterns, and the quiet zone around the terminal drawing.
final class StructureTests: XCTestCase {
    // 45 bytes: more than version 2 holds at level L (32), within version 3 (53).
    let url = "https://login.example.com/device?code=WDJB-MJH"

    func testSizeOfAKnownVersion() throws {
        let code = try XCTUnwrap(QRCode.encode(url))
        XCTAssertEqual(code.version, 3)
        XCTAssertEqual(code.size, 29)
        XCTAssertEqual(QRCode.encode(String(repeating: "A", count: 17))?.size, 21)
        XCTAssertEqual(QRCode.encode(String(repeating: "A", count: 18))?.size, 25)
    }

    func testFinderPatternsAtThreeCornersOnly() throws {
        let code = try XCTUnwrap(QRCode.encode(url))
        let n = code.size
        for (x0, y0) in [(0, 0), (n - 7, 0), (0, n - 7)] {
            XCTAssertTrue(hasFinder(code, x0, y0), "no finder pattern at (\(x0), \(y0))")
        }
        XCTAssertFalse(hasFinder(code, n - 7, n - 7))
        // The light separators inside the code around each finder.
        for i in 0..<8 {
            XCTAssertFalse(code.isDark(x: 7, y: i))
            XCTAssertFalse(code.isDark(x: i, y: 7))
            XCTAssertFalse(code.isDark(x: n - 8, y: i))
            XCTAssertFalse(code.isDark(x: i, y: n - 8))
        }
    }

    func testTerminalDrawingHasTheQuietZoneAndReadsBackAsTheCode() throws {
        let code = try XCTUnwrap(QRCode.encode(url))
        let lines = code.terminalLines()
        let side = code.size + 8
        XCTAssertEqual(code.terminalSize.columns, side)
        XCTAssertEqual(lines.count, (side + 1) / 2)
        let cells = lines.map { line -> [Character] in
            XCTAssertTrue(line.hasPrefix("\u{1B}[40;97m") && line.hasSuffix("\u{1B}[0m"), "colours not set and reset")
            return Array(line.dropFirst(8).dropLast(4))
        }
        // Each cell is two modules: light is drawn (white), dark is the black background.
        func light(_ x: Int, _ y: Int) -> Bool {
            let cell = cells[y / 2][x]
            return y % 2 == 0 ? (cell == "\u{2588}" || cell == "\u{2580}") : (cell == "\u{2588}" || cell == "\u{2584}")
        }
        for row in cells { XCTAssertEqual(row.count, side) }
        for y in 0..<side {
            for x in 0..<side {
                let inside = (4..<side - 4).contains(x) && (4..<side - 4).contains(y)
                let expected = inside ? !code.isDark(x: x - 4, y: y - 4) : true
                XCTAssertEqual(light(x, y), expected, "module (\(x), \(y)) of the drawing")
            }
        }
    }

    /// The 7×7 finder: a dark ring, a light ring, a dark 3×3 centre.
    private func hasFinder(_ code: QRCode, _ x0: Int, _ y0: Int) -> Bool {
        (0..<7).allSatisfy { dy in
            (0..<7).allSatisfy { dx in
                let ring = max(abs(dx - 3), abs(dy - 3))
                return code.isDark(x: x0 + dx, y: y0 + dy) == (ring != 2)
            }
        }
    }
}
