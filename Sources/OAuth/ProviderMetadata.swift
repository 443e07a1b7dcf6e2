#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The provider's OpenID Connect discovery document (OpenID Connect Discovery 1.0 §3,
/// RFC 8414), reduced to what authbroker uses.
public struct ProviderMetadata: Codable, Sendable, Equatable {
    public var issuer: String
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String
    public var deviceAuthorizationEndpoint: String?
    public var revocationEndpoint: String?
    public var userinfoEndpoint: String?
    public var jwksURI: String?
    public var endSessionEndpoint: String?
    /// RFC 7662 §2; discovery lists it under RFC 8414 §2.
    public var introspectionEndpoint: String?
    public var grantTypesSupported: [String]?
    public var tokenEndpointAuthMethodsSupported: [String]?
    public var revocationEndpointAuthMethodsSupported: [String]?
    public var idTokenSigningAlgValuesSupported: [String]?
    public var codeChallengeMethodsSupported: [String]?
    public var authorizationResponseIssParameterSupported: Bool?
    /// The algorithms the provider takes DPoP proofs in (RFC 9449 §5.1); nil when it says
    /// nothing.
    public var dpopSigningAlgValuesSupported: [String]? = nil
    /// OAuth 2.0 for First-Party Applications (draft-ietf-oauth-first-party-apps §4.1);
    /// nil when the provider names none.
    public var authorizationChallengeEndpoint: String? = nil
    /// Dynamic client registration (RFC 7591 §3, listed under RFC 8414 §2); nil when the
    /// server takes none.
    public var registrationEndpoint: String? = nil
    /// The scopes the server names (RFC 8414 §2); nil when it names none.
    public var scopesSupported: [String]? = nil
    /// Whether the server takes an https URL of a client ID metadata document as
    /// `client_id` (draft-ietf-oauth-client-id-metadata-document); nil when it says nothing.
    public var clientIDMetadataDocumentSupported: Bool? = nil

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case jwksURI = "jwks_uri"
        case endSessionEndpoint = "end_session_endpoint"
        case introspectionEndpoint = "introspection_endpoint"
        case grantTypesSupported = "grant_types_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case revocationEndpointAuthMethodsSupported = "revocation_endpoint_auth_methods_supported"
        case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
        case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
        case authorizationChallengeEndpoint = "authorization_challenge_endpoint"
        case registrationEndpoint = "registration_endpoint"
        case scopesSupported = "scopes_supported"
        case clientIDMetadataDocumentSupported = "client_id_metadata_document_supported"
    }

    /// Makes metadata by hand (tests, providers without discovery); unlisted members are nil.
    public init(issuer: String, tokenEndpoint: String, authorizationEndpoint: String? = nil,
                deviceAuthorizationEndpoint: String? = nil, revocationEndpoint: String? = nil,
                userinfoEndpoint: String? = nil, jwksURI: String? = nil, endSessionEndpoint: String? = nil,
                grantTypesSupported: [String]? = nil, tokenEndpointAuthMethodsSupported: [String]? = nil,
                revocationEndpointAuthMethodsSupported: [String]? = nil,
                idTokenSigningAlgValuesSupported: [String]? = nil, codeChallengeMethodsSupported: [String]? = nil,
                authorizationResponseIssParameterSupported: Bool? = nil, introspectionEndpoint: String? = nil,
                registrationEndpoint: String? = nil, scopesSupported: [String]? = nil,
                clientIDMetadataDocumentSupported: Bool? = nil) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.jwksURI = jwksURI
        self.endSessionEndpoint = endSessionEndpoint
        self.introspectionEndpoint = introspectionEndpoint
        self.grantTypesSupported = grantTypesSupported
        self.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported
        self.revocationEndpointAuthMethodsSupported = revocationEndpointAuthMethodsSupported
        self.idTokenSigningAlgValuesSupported = idTokenSigningAlgValuesSupported
        self.codeChallengeMethodsSupported = codeChallengeMethodsSupported
        self.authorizationResponseIssParameterSupported = authorizationResponseIssParameterSupported
        self.registrationEndpoint = registrationEndpoint
        self.scopesSupported = scopesSupported
        self.clientIDMetadataDocumentSupported = clientIDMetadataDocumentSupported
    }
}

/// How authbroker identifies itself to one provider.
public struct ClientConfiguration: Sendable, Equatable {
    /// The issuer identifier exactly as configured; discovery must return the same string.
    public var issuer: String
    public var clientID: String
    /// Confidential clients only. Never logged.
    public var clientSecret: String?
    /// The name of the parameter that carries the resource: `resource` (RFC 8707) or, for
    /// providers that predate it, `audience`.
    public var audienceParameter: String

    public init(issuer: String, clientID: String, clientSecret: String? = nil, audienceParameter: String = "resource") {
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.audienceParameter = audienceParameter
    }
}

/// A token endpoint response (RFC 6749 §5.1). `expiresIn` is turned into an absolute time
/// by the caller, counted from when the request was sent.
public struct TokenResponse: Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int?
    public var refreshToken: String?
    public var idToken: String?
    public var scope: String?
    /// Set when the answer's access token cannot be used (no `token_type`, an unknown one, a
    /// broken `expires_in`, no `access_token`) although it brought a refresh token: the
    /// provider took the refresh and may have spent the refresh token sent, so the new one
    /// must be kept all the same (`OAuthClient.refresh(keepingRefreshToken:)`). Then
    /// `refreshToken` is the only member that counts.
    public var unusable: OAuthError?
    /// The answer's `Date` header (RFC 9110 §6.6.1), Unix seconds by the provider's clock;
    /// nil without one: for telling how far that clock is from ours.
    public var providerDate: Int64?

    public init(accessToken: String, tokenType: String, expiresIn: Int?, refreshToken: String?, idToken: String?, scope: String?,
                unusable: OAuthError? = nil) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.scope = scope
        self.unusable = unusable
    }
}

/// A device authorization response (RFC 8628 §3.2).
public struct DeviceAuthorization: Sendable, Equatable {
    public var deviceCode: String
    public var userCode: String
    public var verificationURI: String
    public var verificationURIComplete: String?
    /// Seconds the codes stay valid.
    public var expiresIn: Int
    /// Seconds to wait between polls (5 when the provider did not say, RFC 8628 §3.2).
    public var interval: Int

    public init(deviceCode: String, userCode: String, verificationURI: String, verificationURIComplete: String?, expiresIn: Int, interval: Int) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresIn = expiresIn
        self.interval = interval
    }
}

/// One answer to a device token poll (RFC 8628 §3.5).
public enum DevicePollResult: Sendable, Equatable {
    /// `authorization_pending`: ask again after the interval.
    case pending
    /// `slow_down`: add 5 seconds to the interval, then ask again.
    case slowDown
    case tokens(TokenResponse)
}
