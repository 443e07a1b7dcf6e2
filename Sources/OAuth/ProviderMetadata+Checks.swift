/// How a provider's metadata document is read and checked, the same whichever URL it came
/// from: OpenID Connect discovery (`OAuthClient.discover`) or RFC 8414
/// (`ResourceDiscovery.authorizationServerMetadata`).
extension ProviderMetadata: DocumentDecoding {
    /// Decodes `body` and checks it: the document must name exactly `issuer` (RFC 8414 §3.3,
    /// OpenID Connect Discovery §4.3: the defence against mix-up), and every endpoint must be
    /// https (or http on loopback). `place` names the document in sentences, `asked` says
    /// where `issuer` came from ("as configured").
    static func checked(_ body: [UInt8], place: String, issuer: String,
                        asked: String = "as configured") throws(OAuthError) -> ProviderMetadata {
        let metadata = try decoded(from: body, place: place)
        guard metadata.issuer == issuer else {
            throw .configuration("\(place) names the issuer \(EndpointPolicy.describe(metadata.issuer)), not \(EndpointPolicy.describe(issuer)) \(asked); they must be identical")
        }
        for (name, endpoint) in metadata.endpoints {
            try EndpointPolicy.check(endpoint, what: "the provider's \(name)")
        }
        return metadata
    }

    /// The sentence for a member of the wrong type: which one, and what it must be, for the
    /// user to pass on to the provider's administrators.
    static func wrongType(_ member: String, in place: String) -> String {
        let booleans: Set = [CodingKeys.authorizationResponseIssParameterSupported.rawValue,
                             CodingKeys.clientIDMetadataDocumentSupported.rawValue]
        return "\(place) is not a valid discovery document: its \(member) is not \(expected(member, booleans: booleans)) (RFC 8414 §2); the provider's administrators must correct it"
    }

    static func unreadable(in place: String) -> String { "\(place) is not a valid discovery document" }

    /// Every endpoint URL the document gives, with its member name.
    var endpoints: [(String, String)] {
        let all: [(String, String?)] = [
            ("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint),
            ("device_authorization_endpoint", deviceAuthorizationEndpoint), ("revocation_endpoint", revocationEndpoint),
            ("userinfo_endpoint", userinfoEndpoint), ("jwks_uri", jwksURI), ("end_session_endpoint", endSessionEndpoint),
            ("introspection_endpoint", introspectionEndpoint),
            ("authorization_challenge_endpoint", authorizationChallengeEndpoint),
            ("registration_endpoint", registrationEndpoint),
        ]
        return all.compactMap { name, url in url.map { (name, $0) } }
    }
}
