import BrokerCrypto
import Foundation

/// A key pair made at test time by the `openssl` command-line tool, which also makes the
/// signatures: the code under test never signs anything itself, so a bug in it cannot
/// hide behind a matching bug in the signer.
public struct TestKey: Sendable {
    /// The kinds of key the tests need.
    public enum Kind: Sendable {
        case rsa(bits: Int)
        case p256
        case p384
        case ed25519
    }

    /// The private key, PEM, in a temporary directory.
    public let privateKeyPath: String
    /// The public key as a JWK (no kid, use or alg unless added).
    public let jwk: JWK
    /// The public key, PEM, as a confusion attacker would take it for an HMAC secret.
    public let publicKeyPEM: [UInt8]
    public let kind: Kind

    /// Generates a key of `kind` in `directory` with `openssl genpkey`.
    public static func generate(_ kind: Kind, in directory: URL) throws -> TestKey {
        let path = directory.appendingPathComponent("key-\(UUID().uuidString).pem").path
        switch kind {
        case .rsa(let bits):
            try OpenSSLTool.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)", "-out", path])
        case .p256:
            try OpenSSLTool.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        case .p384:
            try OpenSSLTool.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", path])
        case .ed25519:
            try OpenSSLTool.run(["genpkey", "-algorithm", "ED25519", "-out", path])
        }
        let pem = try OpenSSLTool.run(["pkey", "-in", path, "-pubout"])
        let der = try OpenSSLTool.run(["pkey", "-in", path, "-pubout", "-outform", "DER"])
        let jwk: JWK
        switch kind {
        case .rsa:
            let text = String(decoding: try OpenSSLTool.run(["rsa", "-in", path, "-noout", "-modulus"]), as: UTF8.self)
            guard let hex = text.split(separator: "=").last.map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }),
                  let modulus = bytes(hex: hex)
            else { throw OpenSSLTool.Failure(message: "openssl printed no modulus") }
            // openssl genpkey uses the exponent 65537.
            jwk = JWK(kty: "RSA", n: Base64URL.encode(modulus), e: Base64URL.encode([1, 0, 1]))
        case .p256, .p384:
            // SubjectPublicKeyInfo ends with the uncompressed point 04 ‖ x ‖ y.
            let size = if case .p256 = kind { 32 } else { 48 }
            let point = Array(der.suffix(1 + 2 * size))
            guard point.first == 0x04 else { throw OpenSSLTool.Failure(message: "unexpected EC public key encoding") }
            jwk = JWK(kty: "EC", crv: size == 32 ? "P-256" : "P-384",
                      x: Base64URL.encode(Array(point[1...size])), y: Base64URL.encode(Array(point[(1 + size)...])))
        case .ed25519:
            jwk = JWK(kty: "OKP", crv: "Ed25519", x: Base64URL.encode(Array(der.suffix(32))))
        }
        return TestKey(privateKeyPath: path, jwk: jwk, publicKeyPEM: pem, kind: kind)
    }

    /// This key's JWK with a kid (and optionally use and alg).
    public func jwk(kid: String?, use: String? = "sig", alg: String? = nil) -> JWK {
        var copy = jwk
        copy.kid = kid
        copy.use = use
        copy.alg = alg
        return copy
    }

    /// Signs `message` with `algorithm` and returns the signature as JWS carries it (r‖s
    /// for ECDSA). `pssSaltLength` overrides PS256's salt length ("digest" by the RFC).
    public func sign(_ message: [UInt8], _ algorithm: JWSAlgorithm, pssSaltLength: String = "digest") throws -> [UInt8] {
        let input = try OpenSSLTool.temporaryFile(message)
        defer { try? FileManager.default.removeItem(atPath: input) }
        switch algorithm {
        case .rs256:
            return try OpenSSLTool.run(["dgst", "-sha256", "-sign", privateKeyPath, "-binary", input])
        case .ps256:
            return try OpenSSLTool.run(["dgst", "-sha256", "-sign", privateKeyPath, "-sigopt", "rsa_padding_mode:pss",
                                        "-sigopt", "rsa_pss_saltlen:\(pssSaltLength)", "-sigopt", "rsa_mgf1_md:sha256",
                                        "-binary", input])
        case .es256, .es384:
            let digest = algorithm == .es256 ? "-sha256" : "-sha384"
            let der = try OpenSSLTool.run(["dgst", digest, "-sign", privateKeyPath, "-binary", input])
            return try Self.rawECDSA(der, size: algorithm == .es256 ? 32 : 48)
        case .edDSA:
            return try OpenSSLTool.run(["pkeyutl", "-sign", "-inkey", privateKeyPath, "-rawin", "-in", input])
        }
    }

    /// DER ECDSA-Sig-Value → r‖s, each left-padded to `size` bytes.
    static func rawECDSA(_ der: [UInt8], size: Int) throws -> [UInt8] {
        var index = 0
        func next() throws -> UInt8 {
            guard index < der.count else { throw OpenSSLTool.Failure(message: "short DER signature") }
            defer { index += 1 }
            return der[index]
        }
        func length() throws -> Int {
            let first = try next()
            if first < 0x80 { return Int(first) }
            var value = 0
            for _ in 0..<(first & 0x7F) { value = value << 8 | Int(try next()) }
            return value
        }
        func integer() throws -> [UInt8] {
            guard try next() == 0x02 else { throw OpenSSLTool.Failure(message: "DER signature: no INTEGER") }
            let count = try length()
            guard index + count <= der.count else { throw OpenSSLTool.Failure(message: "short DER signature") }
            var value = Array(der[index..<(index + count)])
            index += count
            while value.count > size, value.first == 0 { value.removeFirst() }
            return [UInt8](repeating: 0, count: size - value.count) + value
        }
        guard try next() == 0x30 else { throw OpenSSLTool.Failure(message: "DER signature: no SEQUENCE") }
        _ = try length()
        return try integer() + integer()
    }

    private static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
            out.append(byte)
        }
        return out
    }
}

/// Runs `/usr/bin/openssl` (or `openssl` on PATH) for the tests.
public enum OpenSSLTool {
    /// A failed run; the message holds openssl's stderr.
    public struct Failure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Runs openssl with `arguments` and returns its standard output.
    @discardableResult
    public static func run(_ arguments: [String]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read before waiting: a full pipe would block openssl.
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(message: "openssl \(arguments.first ?? "") failed: \(String(decoding: err, as: UTF8.self))")
        }
        return Array(out)
    }

    /// HMAC-SHA256 of `message` keyed with `key`: what an attacker signs HS256 tokens with.
    public static func hmacSHA256(_ message: [UInt8], key: [UInt8]) throws -> [UInt8] {
        let input = try temporaryFile(message)
        defer { try? FileManager.default.removeItem(atPath: input) }
        let hexKey = key.map { String(format: "%02x", $0) }.joined()
        return try run(["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-binary", input])
    }

    /// Writes `bytes` to a new temporary file and returns its path.
    public static func temporaryFile(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("jws-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A fresh temporary directory for keys; remove it in tearDown.
    public static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("authbroker-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return url
    }
}

/// Builds compact JWS strings (RFC 7515 §7.1) for tests.
public enum TestJWS {
    /// `BASE64URL(header).BASE64URL(payload).BASE64URL(sign(signing input))`.
    public static func compact(header: String, payload: String, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }
}
