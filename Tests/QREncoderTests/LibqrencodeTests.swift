import CQREncode
import QREncoder
import XCTest

/// authctl's encoder against libqrencode, module for module: every version 1–40 at every
/// level, each filled to the last byte it holds, so that block layout, interleaving,
/// Reed-Solomon codewords, alignment patterns and version information all take part.
final class LibqrencodeTests: XCTestCase {
    func testEveryVersionAndLevelMatchesLibqrencode() throws {
        var seed: UInt32 = 12345
        for level in QRCode.Level.allCases {
            for version in 1...40 {
                // The most bytes this version holds: one more needs the next version.
                let count = QRCode.capacity(version: version, level: level)
                XCTAssertEqual(QRCode.encode([UInt8](repeating: 0, count: count + 1), level: level, mask: 0)?.version,
                               version == 40 ? nil : version + 1)
                let bytes = (0..<count).map { _ -> UInt8 in
                    seed = seed &* 1_103_515_245 &+ 12345
                    return UInt8(truncatingIfNeeded: seed >> 16)
                }
                let reference = try XCTUnwrap(libqrencode(bytes, level: level), "libqrencode failed for version \(version)")
                XCTAssertEqual(reference.version, version, "level \(level), \(count) bytes")
                let referenceMask = mask(readFrom: reference)
                let ours = try XCTUnwrap(QRCode.encode(bytes, level: level, mask: referenceMask))
                XCTAssertEqual(ours.version, reference.version)
                XCTAssertTrue(matrix(of: ours) == reference.modules, "version \(version), level \(level): modules differ from libqrencode's")
            }
        }
        // The mask is forced to libqrencode's: its choice differs in about one code of five,
        // as libqrencode scores finder-like patterns its own way (both codes read the same).
    }

    func testTooMuchForVersion40IsRefused() {
        XCTAssertNil(QRCode.encode([UInt8](repeating: 0x41, count: 2954), level: .low))
        XCTAssertEqual(QRCode.encode([UInt8](repeating: 0x41, count: 2953), level: .low)?.version, 40)
    }

    private struct Reference { let version: Int; let modules: [Bool] }

    private func libqrencode(_ bytes: [UInt8], level: QRCode.Level) -> Reference? {
        let levels = [QR_ECLEVEL_L, QR_ECLEVEL_M, QR_ECLEVEL_Q, QR_ECLEVEL_H]
        guard let code = QRcode_encodeData(Int32(bytes.count), bytes, 0, levels[level.rawValue]) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let modules = (0..<width * width).map { code.pointee.data[$0] & 1 == 1 }
        return Reference(version: Int(code.pointee.version), modules: modules)
    }

    private func matrix(of code: QRCode) -> [Bool] {
        (0..<code.size * code.size).map { code.isDark(x: $0 % code.size, y: $0 / code.size) }
    }

    /// The data mask a code's format information names (the copy beside the top-left finder).
    private func mask(readFrom reference: Reference) -> Int {
        let size = Int(Double(reference.modules.count).squareRoot())
        func dark(_ x: Int, _ y: Int) -> Int { reference.modules[y * size + x] ? 1 : 0 }
        var positions = (0...5).map { (8, $0) } + [(8, 7), (8, 8), (7, 8)]
        positions += (9..<15).map { (14 - $0, 8) }
        let bits = positions.enumerated().reduce(0) { $0 | dark($1.element.0, $1.element.1) << $1.offset } ^ 0x5412
        return (bits >> 10) & 7
    }
}
