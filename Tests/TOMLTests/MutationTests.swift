import TOML
import XCTest

/// Damaged documents are refused with a message, never a crash, and the message still
/// does not quote the secret the document holds.
final class MutationTests: XCTestCase {
    private static let document = """
        # a config
        [daemon]
        store = "memory"
        refresh_margin = 60

        [providers.corp]
        issuer = "https://login.example.com"
        client_secret = "s3cr3tV4lu3"
        scopes = ["openid", 'profile', \"\"\"email\"\"\", '''x''']
        params = { prompt = "login", n = 0x1F, f = 1.5e3, d = 1979-05-27T07:32:00Z }

        [[allow]]
        exe = "/usr/bin/git"
        claims = true
        """

    /// A small deterministic generator, so a failure is reproducible.
    private struct SplitMix {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    func testMutatedDocumentsNeverCrashOrLeak() {
        let original = Array(Self.document.utf8)
        let alphabet = Array("\"'[]{}=.,#\\\n\r\t x0_+-:eE\u{0}\u{7F}".utf8) + [0xC3, 0xFF]
        var random = SplitMix(state: 42)
        var refused = 0
        for _ in 0..<3000 {
            var bytes = original
            for _ in 0...random.next(3) {
                let at = random.next(bytes.count)
                switch random.next(3) {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(alphabet[random.next(alphabet.count)], at: at)
                default: bytes[at] = alphabet[random.next(alphabet.count)]
                }
            }
            do {
                _ = try TOMLTable(parsingUTF8: bytes)
            } catch {
                refused += 1
                XCTAssertGreaterThanOrEqual(error.line, 1)
                XCTAssertGreaterThanOrEqual(error.column, 1)
                XCTAssertFalse(error.description.contains("s3cr3t"), "\(error) for \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        XCTAssertGreaterThan(refused, 1000)
    }
}
