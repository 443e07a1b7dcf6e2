/// The device authorization grant (RFC 8628).
extension OAuthClient {
    /// Asks for a device code and user code (RFC 8628 §3.1). Each resource is sent as
    /// its own `resource` (or configured audience) parameter (RFC 8707 §2); `scope` is
    /// left out when `scopes` is empty.
    public func startDeviceAuthorization(_ metadata: ProviderMetadata, scopes: [String],
                                         resources: [String]) async throws(OAuthError) -> DeviceAuthorization {
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no device authorization endpoint")
        }
        var parameters: [(String, String)] = []
        if !scopes.isEmpty { parameters.append(("scope", scopes.joined(separator: " "))) }
        parameters += resources.map { (configuration.audienceParameter, $0) }
        let response = try await postForm(parameters, to: endpoint, name: "device authorization endpoint",
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported)
        return try ProviderAnswer.deviceAuthorization(ProviderAnswer.object(response, place: "device authorization endpoint", sent: secrets(in: [])))
    }

    /// Asks once whether the user has approved (RFC 8628 §3.4). `authorization_pending`
    /// and `slow_down` come back as results; `access_denied`, `expired_token` and every
    /// other error are thrown as `OAuthError.provider`.
    public func pollDeviceToken(_ metadata: ProviderMetadata, deviceCode: String) async throws(OAuthError) -> DevicePollResult {
        do {
            return .tokens(try await tokenRequest(metadata, [
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode),
            ]))
        } catch {
            switch error {
            case .provider(oauthCode: "authorization_pending", _, _): return .pending
            case .provider(oauthCode: "slow_down", _, _): return .slowDown
            default: throw error
            }
        }
    }
}
