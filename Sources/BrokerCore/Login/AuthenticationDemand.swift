import OAuth

/// What a sign-in asked of the user's authentication (RFC 9470, step-up: a resource's
/// `insufficient_user_authentication` challenge names `acr_values` or `max_age`, which the
/// sign-in sends, `authctl login --param acr_values=…`): the provider may ignore both
/// (OpenID Connect Core §3.1.2.1 makes `acr_values` voluntary), so the ID token's `acr` and
/// `auth_time` are checked before the sign-in is kept, and the user told what came back.
struct AuthenticationDemand: Sendable, Equatable {
    /// The authentication context classes asked for, in order of preference.
    var acrValues: [String]
    /// The longest ago the user may have authenticated, in seconds.
    var maxAge: Int?

    /// The demand in an authorization request's parameters, or nil when it makes none.
    init?(parameters: [(String, String)]) {
        let acr = parameters.last { $0.0 == "acr_values" }.map { $0.1.split(separator: " ").map(String.init) } ?? []
        let maxAge = parameters.last { $0.0 == "max_age" }.flatMap { Int($0.1) }
        guard !acr.isEmpty || maxAge != nil else { return nil }
        self.acrValues = acr
        self.maxAge = maxAge
    }

    /// Throws the sentence for an ID token that does not meet the demand; `now` and `skew`
    /// as for the ID token's other time checks.
    func check(_ claims: IDTokenClaims, provider: String, now: Double, skew: Int) throws(BrokerError) {
        if !acrValues.isEmpty {
            let acr = claims.all["acr"]?.stringValue
            guard let acr, acrValues.contains(acr) else {
                let got = acr.map { "acr \(ProviderAnswer.printable($0, limit: 100))" } ?? "no acr claim"
                throw BrokerError.loginFailed(provider: provider, message: "\(provider) signed you in, but its ID token has \(got), not one of \(acrValues.joined(separator: " ")) that were asked for (RFC 9470): the resource will refuse it again; ask \(provider)'s administrators which acr_values it honours, or sign in with the method the resource needs")
            }
        }
        if let maxAge {
            guard let authTime = claims.all["auth_time"]?.numberValue else {
                throw BrokerError.loginFailed(provider: provider, message: "\(provider) signed you in, but its ID token has no auth_time although max_age=\(maxAge) was asked for (OpenID Connect Core §3.1.2.1): the resource cannot tell how recent the sign-in was; tell \(provider)'s administrators")
            }
            let age = Int(now - authTime)
            guard age <= maxAge + skew else {
                throw BrokerError.loginFailed(provider: provider, message: "\(provider) reused a sign-in of \(age) s ago although max_age=\(maxAge) was asked for: sign out at \(provider) in the browser (or use a private window) and sign in again")
            }
        }
    }
}
