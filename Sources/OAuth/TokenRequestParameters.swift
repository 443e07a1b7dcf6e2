/// Extra parameters of token requests (`token_params` in the configuration, `params` of
/// `token.get`): Auth0's `audience`, Logto's `organization_id`, Azure's `claims`, …
public enum TokenRequestParameters {
    /// Names the protocol owns in a token request, on top of those of the authorization
    /// request (`AuthorizationRequest.reservedParameters`): extra parameters never set them.
    public static let reservedParameters: Set<String> = AuthorizationRequest.reservedParameters.union([
        "grant_type", "refresh_token", "code", "code_verifier", "device_code", "client_secret",
        "client_assertion", "client_assertion_type", "resource", "audience",
    ])

    /// The names in `names` the protocol owns, sorted, for a clear refusal.
    public static func reserved(in names: some Sequence<String>) -> [String] {
        names.filter { reservedParameters.contains($0) }.sorted()
    }
}
