import BrokerProtocol

/// `token.get` on the wire without Codable: the request written by hand and the answer
/// read with ``LightJSON``. Everything else (error answers, a result of another shape, late
/// answers) goes on to the Codable path, which explains what it finds.
enum TokenWire {
    /// The request line, without its newline; members as `JSONEncoder` would write them.
    static func request(id: Int64, _ params: TokenGetParams) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"{"jsonrpc":"2.0","id":"#.utf8)
        out.append(contentsOf: String(id).utf8)
        out.append(contentsOf: #","method":"token.get","params":{"#.utf8)
        var first = true
        func member(_ key: String) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            quoted(key, into: &out)
            out.append(UInt8(ascii: ":"))
        }
        if let resource = params.resource { member("resource"); quoted(resource, into: &out) }
        if let scopes = params.scopes {
            member("scopes")
            out.append(UInt8(ascii: "["))
            for (i, scope) in scopes.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                quoted(scope, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        if let provider = params.provider { member("provider"); quoted(provider, into: &out) }
        if let account = params.account { member("account"); quoted(account, into: &out) }
        if let minTTL = params.minTTL { member("min_ttl"); out.append(contentsOf: String(minTTL).utf8) }
        if let wait = params.waitForSignIn { member("wait_for_sign_in"); out.append(contentsOf: String(wait).utf8) }
        if let extra = params.params {
            member("params")
            out.append(UInt8(ascii: "{"))
            for (i, name) in extra.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                quoted(name, into: &out)
                out.append(UInt8(ascii: ":"))
                quoted(extra[name] ?? "", into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        if let hint = params.accountHint { member("account_hint"); quoted(hint, into: &out) }
        if let context = params.context {
            member("context")
            out.append(UInt8(ascii: "{"))
            if let remote = context.gitRemote {
                quoted("git_remote", into: &out)
                out.append(UInt8(ascii: ":"))
                quoted(remote, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "}}".utf8)
        return out
    }

    /// The result, when `line` is the successful answer to request `id`; nil otherwise.
    static func result(_ line: ArraySlice<UInt8>, id: Int64) -> TokenGetResult? {
        guard let answer = LightJSON.parse(line), answer["jsonrpc"]?.string == "2.0",
              answer["id"]?.integer == id, answer["error"] == nil,
              let result = answer["result"],
              let accessToken = result["access_token"]?.string,
              let tokenType = result["token_type"]?.string,
              let expiresAt = result["expires_at"]?.integer,
              let provider = result["provider"]?.string,
              let account = result["account"]?.string
        else { return nil }
        guard let scope = optionalString(result["scope"]), let resource = optionalString(result["resource"]) else { return nil }
        guard let chosenBy = optionalString(result["chosen_by"]) else { return nil }
        return TokenGetResult(accessToken: accessToken, tokenType: tokenType, expiresAt: expiresAt,
                              scope: scope, resource: resource, provider: provider, account: account, chosenBy: chosenBy)
    }

    /// `.some(nil)` for an absent or null member, `.some(text)` for a string, nil otherwise.
    private static func optionalString(_ value: LightJSON?) -> String?? {
        switch value {
        case nil, .null?: return .some(nil)
        case .string(let s)?: return .some(s)
        default: return nil
        }
    }

    /// A JSON string, by the package's one escaper (BrokerProtocol's JSONString).
    static func quoted(_ text: String, into out: inout [UInt8]) {
        JSONString.append(text, to: &out)
    }
}
