/// A QR Code (ISO/IEC 18004) of a byte string: the matrix of dark and light modules,
/// without the quiet zone.
///
/// authctl shows one beside a device sign-in's URL so that a phone can open it. Byte mode
/// only, versions 1–40; the smallest version that holds the text is chosen, and the mask
/// with the lowest penalty score, as the standard asks. Written here rather than linked
/// from libqrencode because a release authctl is one static executable and Debian ships
/// libqrencode as a shared library only; `QREncoderTests` holds this encoder to
/// libqrencode's output, module for module.
public struct QRCode: Sendable {
    /// How much of the code may be damaged and still read: 7, 15, 25 or 30 percent.
    public enum Level: Int, Sendable, CaseIterable {
        case low = 0, medium, quartile, high

        /// The two bits the format information carries for the level.
        var formatBits: Int { [1, 0, 3, 2][rawValue] }
    }

    /// 1–40: the size is 17 + 4 × version modules a side.
    public let version: Int
    /// Modules on a side.
    public let size: Int
    /// 0–7: the data mask applied.
    public let mask: Int
    var modules: [Bool]
    var isFunction: [Bool]

    /// Whether the module at column `x`, row `y` is dark; outside the matrix, light.
    public func isDark(x: Int, y: Int) -> Bool {
        (0..<size).contains(x) && (0..<size).contains(y) && modules[y * size + x]
    }

    /// The code of `bytes` at `level`, or nil when they do not fit in version 40.
    /// `mask` forces one data mask (tests); otherwise the best is chosen.
    public static func encode(_ bytes: [UInt8], level: Level = .low, mask: Int? = nil) -> QRCode? {
        guard let version = (1...40).first(where: { fits(bytes.count, version: $0, level: level) }) else { return nil }
        var code = QRCode(version: version)
        let data = codewords(bytes, version: version, level: level)
        code.drawFunctionPatterns(level: level)
        code.drawCodewords(Tables.interleavedWithECC(data, version: version, level: level))
        let chosen = mask ?? (0..<8).min { code.penalty(masked: $0, level: level) < code.penalty(masked: $1, level: level) } ?? 0
        code.applyMask(chosen)
        code.drawFormatBits(level: level, mask: chosen)
        return QRCode(copying: code, mask: chosen)
    }

    /// The code of a string's UTF-8 bytes.
    public static func encode(_ text: String, level: Level = .low) -> QRCode? {
        encode(Array(text.utf8), level: level)
    }

    private init(version: Int) {
        self.version = version
        self.size = 17 + 4 * version
        self.mask = 0
        self.modules = Array(repeating: false, count: size * size)
        self.isFunction = modules
    }

    private init(copying other: QRCode, mask: Int) {
        self.version = other.version
        self.size = other.size
        self.mask = mask
        self.modules = other.modules
        self.isFunction = other.isFunction
    }

    // MARK: Data

    private static func characterCountBits(_ version: Int) -> Int { version < 10 ? 8 : 16 }

    /// The most bytes a code of `version` holds at `level`.
    public static func capacity(version: Int, level: Level) -> Int {
        (Tables.dataCodewords(version: version, level: level) * 8 - 4 - characterCountBits(version)) / 8
    }

    private static func fits(_ count: Int, version: Int, level: Level) -> Bool {
        count <= capacity(version: version, level: level)
    }

    /// Mode indicator, character count, the bytes, terminator and padding, as codewords.
    private static func codewords(_ bytes: [UInt8], version: Int, level: Level) -> [UInt8] {
        let capacity = Tables.dataCodewords(version: version, level: level) * 8
        var bits: [Bool] = []
        func append(_ value: Int, _ count: Int) {
            for i in stride(from: count - 1, through: 0, by: -1) { bits.append((value >> i) & 1 == 1) }
        }
        append(0b0100, 4)
        append(bytes.count, characterCountBits(version))
        for b in bytes { append(Int(b), 8) }
        append(0, min(4, capacity - bits.count))
        append(0, (8 - bits.count % 8) % 8)
        var result = stride(from: 0, to: bits.count, by: 8).map { start in
            (start..<start + 8).reduce(UInt8(0)) { $0 << 1 | (bits[$1] ? 1 : 0) }
        }
        var pad: UInt8 = 0xEC
        while result.count * 8 < capacity {
            result.append(pad)
            pad ^= 0xEC ^ 0x11
        }
        return result
    }

    // MARK: Function patterns

    mutating func setFunction(_ x: Int, _ y: Int, _ dark: Bool) {
        modules[y * size + x] = dark
        isFunction[y * size + x] = true
    }

    private mutating func drawFunctionPatterns(level: Level) {
        for i in 0..<size {
            setFunction(6, i, i % 2 == 0)
            setFunction(i, 6, i % 2 == 0)
        }
        for (x, y) in [(3, 3), (size - 4, 3), (3, size - 4)] {
            for dy in -4...4 {
                for dx in -4...4 where (0..<size).contains(x + dx) && (0..<size).contains(y + dy) {
                    let distance = max(abs(dx), abs(dy))
                    setFunction(x + dx, y + dy, distance != 2 && distance != 4)
                }
            }
        }
        let centres = Tables.alignmentCentres(version: version)
        for (i, x) in centres.enumerated() {
            for (j, y) in centres.enumerated() {
                let last = centres.count - 1
                if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }  // finders
                for dy in -2...2 {
                    for dx in -2...2 { setFunction(x + dx, y + dy, max(abs(dx), abs(dy)) != 1) }
                }
            }
        }
        drawFormatBits(level: level, mask: 0)  // reserves the area; drawn again once the mask is known
        drawVersion()
    }

    mutating func drawFormatBits(level: Level, mask: Int) {
        let data = level.formatBits << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        let bits = (data << 10 | remainder) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        for i in 0...5 { setFunction(8, i, bit(i)) }
        setFunction(8, 7, bit(6))
        setFunction(8, 8, bit(7))
        setFunction(7, 8, bit(8))
        for i in 9..<15 { setFunction(14 - i, 8, bit(i)) }
        for i in 0..<8 { setFunction(size - 1 - i, 8, bit(i)) }
        for i in 8..<15 { setFunction(8, size - 15 + i, bit(i)) }
        setFunction(8, size - 8, true)  // the dark module
    }

    private mutating func drawVersion() {
        guard version >= 7 else { return }
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        let bits = version << 12 | remainder
        for i in 0..<18 {
            let dark = (bits >> i) & 1 == 1
            setFunction(size - 11 + i % 3, i / 3, dark)
            setFunction(i / 3, size - 11 + i % 3, dark)
        }
    }

    /// The codewords in the zig-zag of two-module columns, right to left, skipping the
    /// vertical timing pattern.
    private mutating func drawCodewords(_ data: [UInt8]) {
        var i = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for vertical in 0..<size {
                for j in 0..<2 {
                    let x = right - j
                    let y = upward ? size - 1 - vertical : vertical
                    if !isFunction[y * size + x] && i < data.count * 8 {
                        modules[y * size + x] = (data[i >> 3] >> (7 - (i & 7))) & 1 == 1
                        i += 1
                    }
                }
            }
            right -= 2
        }
    }
}
