#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
@testable import authctl
import BrokerProtocol
import XCTest

/// `authctl token` is read two ways: `TokenFastPath` for the plain forms, ArgumentParser
/// (`Token`, `TokenOptions`) for everything else. The fast path may step aside, but it must
/// never run a command line ArgumentParser refuses, nor read one differently.
final class TokenParsingTests: XCTestCase {
    struct Parsed: Equatable, CustomStringConvertible {
        var params = TokenGetParams()
        var json = false
        var header = false

        var description: String {
            "resource=\(params.resource ?? "-") scopes=\(params.scopes ?? []) provider=\(params.provider ?? "-") "
                + "account=\(params.account ?? "-") minTTL=\(params.minTTL.map(String.init) ?? "-") json=\(json) header=\(header)"
        }
    }

    enum Outcome: Equatable {
        /// Both read it, to the same values.
        case both(Parsed)
        /// The fast path steps aside; ArgumentParser reads it.
        case parserOnly(Parsed)
        /// The fast path steps aside; ArgumentParser refuses it (a usage error).
        case refused
        /// The fast path steps aside; ArgumentParser prints help.
        case help
    }

    static func params(resource: String? = nil, scopes: [String]? = nil, provider: String? = nil, account: String? = nil,
                       minTTL: Int? = nil, json: Bool = false, header: Bool = false) -> Parsed {
        Parsed(params: TokenGetParams(resource: resource, scopes: scopes, provider: provider, account: account, minTTL: minTTL),
               json: json, header: header)
    }

    static let table: [([String], Outcome)] = [
        ([], .both(params())),
        (["--resource", "https://api.example.com"], .both(params(resource: "https://api.example.com"))),
        (["--resource=https://api.example.com"], .both(params(resource: "https://api.example.com"))),
        (["--resource=https://api.example.com/?a=b"], .both(params(resource: "https://api.example.com/?a=b"))),
        (["--resource=-x"], .both(params(resource: "-x"))),
        (["--resource", "-x"], .refused),
        (["--resource"], .refused),
        (["--resource", "--json"], .refused),
        (["--resource="], .refused),
        (["--resource", ""], .refused),
        (["--resource", "a", "--resource", "b"], .parserOnly(params(resource: "b"))),
        (["--scope", "read"], .both(params(scopes: ["read"]))),
        (["--scope", "read write", "--scope=admin"], .both(params(scopes: ["read", "write", "admin"]))),
        (["--scope", "read", "--scope", "read"], .both(params(scopes: ["read", "read"]))),
        (["--scope="], .refused),
        (["--scope", " "], .both(params())),
        (["--provider", "corp", "--account", "alice"], .both(params(provider: "corp", account: "alice"))),
        (["--account=-alice"], .both(params(account: "-alice"))),
        (["--account", "-alice"], .refused),
        (["--provider", "a", "--provider", "b"], .parserOnly(params(provider: "b"))),
        (["--provider", ""], .refused),
        (["--provider="], .refused),
        (["--min-ttl", "0"], .both(params(minTTL: 0))),
        (["--min-ttl", "86400"], .both(params(minTTL: 86_400))),
        (["--min-ttl=600"], .both(params(minTTL: 600))),
        (["--min-ttl", "007"], .both(params(minTTL: 7))),
        (["--min-ttl", "+5"], .parserOnly(params(minTTL: 5))),
        (["--min-ttl", "86401"], .refused),
        (["--min-ttl", "-1"], .refused),
        (["--min-ttl=-1"], .refused),
        (["--min-ttl", "1e3"], .refused),
        (["--min-ttl", " 5"], .refused),
        (["--min-ttl", "99999999999999999999"], .refused),
        (["--min-ttl"], .refused),
        (["--min-ttl", "5", "--min-ttl", "6"], .parserOnly(params(minTTL: 6))),
        (["--json"], .both(params(json: true))),
        (["--header", "--resource", "r"], .both(params(resource: "r", header: true))),
        (["--json", "--header"], .refused),
        (["--json=yes"], .refused),
        (["--json", "--json"], .parserOnly(params(json: true))),
        (["--bogus"], .refused),
        (["--RESOURCE", "r"], .refused),
        (["-x"], .refused),
        (["extra"], .refused),
        (["--"], .parserOnly(params())),
        (["--", "--json"], .refused),
        // A DPoP proof (`--url`, `--method`, `--nonce`) is ArgumentParser's alone; the proof
        // options are not part of `Parsed`.
        (["--url", "https://api.example.com/x", "--method", "POST"], .parserOnly(params())),
        (["--resource", "r", "--url=https://api.example.com/x"], .parserOnly(params(resource: "r"))),
        (["--method", "POST"], .refused),
        (["--help"], .help),
        (["-h"], .help),
    ]

    func testFastPathAndArgumentParserAgree() {
        for (arguments, expected) in Self.table {
            let fast = Self.fastPath(arguments)
            let parser = Self.argumentParser(arguments)
            let actual: Outcome
            switch (fast, parser) {
            case (let fast?, .both(let read)):
                XCTAssertEqual(fast, read, "the fast path reads \(arguments) differently")
                actual = .both(fast)
            case (let fast?, let other):
                XCTFail("the fast path runs \(arguments), which ArgumentParser does not: \(other); fast path read \(fast)")
                continue
            case (nil, .both(let read)):
                actual = .parserOnly(read)
            case (nil, let other):
                actual = other
            }
            XCTAssertEqual(actual, expected, "authctl token \(arguments.joined(separator: " "))")
        }
    }

    /// `--provider ""` is a usage error that says what to write, for every command that
    /// takes it, not a request for a provider named "" ("no provider named  is configured").
    func testAnEmptyProviderIsAUsageError() {
        for command in [["token"], ["login"], ["logout"], ["whoami"]] {
            XCTAssertThrowsError(try AuthCtl.parseAsRoot(command + ["--provider", ""]), "\(command)") { error in
                XCTAssertEqual(AuthCtl.exitCode(for: error), .validationFailure, "\(command)")
                XCTAssertEqual(AuthCtl.message(for: error), "--provider needs a name, e.g. --provider corp", "\(command)")
            }
        }
    }

    /// `--account ""` is a usage error too, for every command that takes it.
    func testAnEmptyAccountIsAUsageError() {
        for command in [["token"], ["logout"], ["whoami"]] {
            XCTAssertThrowsError(try AuthCtl.parseAsRoot(command + ["--account", ""]), "\(command)") { error in
                XCTAssertEqual(AuthCtl.exitCode(for: error), .validationFailure, "\(command)")
                XCTAssertEqual(AuthCtl.message(for: error), "--account needs a name or a subject, as `authctl accounts` shows them", "\(command)")
            }
        }
    }

    /// What the fast path makes of `authctl token <arguments>`, read from a C `argv` as
    /// `main` hands it over.
    static func fastPath(_ arguments: [String]) -> Parsed? {
        let words = ["authctl", "token"] + arguments
        let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: words.count + 1)
        for (i, word) in words.enumerated() { argv[i] = strdup(word) }
        argv[words.count] = nil
        defer {
            for i in words.indices { free(argv[i]) }
            argv.deallocate()
        }
        return TokenFastPath.parse(TokenFastPath.Words(argc: words.count, argv: argv))
            .map { Parsed(params: $0.params, json: $0.json, header: $0.header) }
    }

    /// What ArgumentParser makes of `authctl token <arguments>`, as `.both` when it reads it.
    static func argumentParser(_ arguments: [String]) -> Outcome {
        do {
            let command = try AuthCtl.parseAsRoot(["token"] + arguments)
            // `--help` parses to ArgumentParser's own help command.
            guard let token = command as? Token else { return .help }
            return .both(Parsed(params: token.options.params(), json: token.json, header: token.header))
        } catch {
            return AuthCtl.exitCode(for: error) == .success ? .help : .refused
        }
    }
}
