#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON document a server publishes or answers (discovery, resource metadata, a client
/// registration), read by JSONDecoder so that a failure names the member at fault, for the
/// user to pass on to the server's administrators. Sentences never quote a value.
protocol DocumentDecoding: Decodable {
    /// The sentence for a required member that is absent or null.
    static func missing(_ member: String, in place: String) -> String
    /// The sentence for a member of the wrong type: which one, and what it must be.
    static func wrongType(_ member: String, in place: String) -> String
    /// The sentence for a body that is no JSON object at all.
    static func unreadable(in place: String) -> String
}

extension DocumentDecoding {
    static func missing(_ member: String, in place: String) -> String { "\(place) has no \(member)" }

    /// Decodes `body`; every failure is `.invalidResponse` with one of the sentences above.
    /// `place` names where the body came from, e.g. "the provider's discovery document at …".
    static func decoded(from body: [UInt8], place: String) throws(OAuthError) -> Self {
        do {
            return try JSONDecoder().decode(Self.self, from: Data(body))
        } catch let DecodingError.keyNotFound(key, _) {
            throw .invalidResponse(missing(key.stringValue, in: place))
        } catch let DecodingError.valueNotFound(_, context) where context.codingPath.count == 1 {
            throw .invalidResponse(missing(context.codingPath[0].stringValue, in: place))
        } catch let DecodingError.typeMismatch(_, context) where !context.codingPath.isEmpty {
            throw .invalidResponse(wrongType(context.codingPath[0].stringValue, in: place))
        } catch let DecodingError.valueNotFound(_, context) where !context.codingPath.isEmpty {
            throw .invalidResponse(wrongType(context.codingPath[0].stringValue, in: place))
        } catch {
            throw .invalidResponse(unreadable(in: place))
        }
    }

    /// What a member must be, for `wrongType` sentences: "true or false" for `booleans`,
    /// "a number" for `numbers`, "a list of strings" for `lists` and names ending in
    /// `_supported`, otherwise "a string".
    static func expected(_ member: String, booleans: Set<String> = [], numbers: Set<String> = [],
                         lists: Set<String> = []) -> String {
        if booleans.contains(member) { return "true or false" }
        if numbers.contains(member) { return "a number" }
        return lists.contains(member) || member.hasSuffix("_supported") ? "a list of strings" : "a string"
    }
}
