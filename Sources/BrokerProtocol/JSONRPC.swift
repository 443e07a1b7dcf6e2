#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON-RPC 2.0 request id: a number, a string, or null (JSON-RPC 2.0 §4).
public enum RequestID: Codable, Hashable, Sendable, CustomStringConvertible {
    case number(Int64)
    case string(String)
    case null

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let n = try? c.decode(Int64.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "id must be a number, a string or null")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .null: try c.encodeNil()
        }
    }

    public var description: String {
        switch self {
        case .number(let n): return String(n)
        case .string(let s): return "\"\(s)\""
        case .null: return "null"
        }
    }
}

/// A request as a client sends it: `{"jsonrpc":"2.0","id":…,"method":…,"params":{…}}`.
public struct Request<Params: Encodable & Sendable>: Encodable, Sendable {
    public let jsonrpc = "2.0"
    public var id: RequestID
    public var method: String
    public var params: Params

    public init(id: RequestID, method: RPCMethod, params: Params) {
        self.id = id
        self.method = method.rawValue
        self.params = params
    }
}

/// The parts of a request every method shares; the server decodes this first and the
/// method's params second, so an unknown method never pays for params decoding.
public struct RequestHeader: Decodable, Sendable {
    public var jsonrpc: String?
    public var id: RequestID?
    public var method: String?
    /// True when the `id` member is present at all (a request without it is a notification).
    public var hasID: Bool

    enum CodingKeys: String, CodingKey { case jsonrpc, id, method }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        jsonrpc = try? c.decodeIfPresent(String.self, forKey: .jsonrpc)
        hasID = c.contains(.id)
        id = hasID ? (try c.decode(RequestID.self, forKey: .id)) : nil
        method = try? c.decodeIfPresent(String.self, forKey: .method)
    }
}

/// Decodes only `params` of a request; absent params decode as the method's empty value.
public struct RequestParams<Params: Decodable & Sendable>: Decodable, Sendable {
    public var params: Params?
}

/// A successful response.
public struct Response<Result: Sendable>: Sendable {
    public var jsonrpc = "2.0"
    public var id: RequestID
    public var result: Result

    public init(id: RequestID, result: Result) {
        self.id = id
        self.result = result
    }
}

extension Response: Encodable where Result: Encodable {}
extension Response: Decodable where Result: Decodable {}

/// An error response.
public struct ErrorResponse: Codable, Sendable {
    public var jsonrpc = "2.0"
    public var id: RequestID
    public var error: RPCError

    public init(id: RequestID, error: RPCError) {
        self.id = id
        self.error = error
    }
}

/// What the client decodes first: whichever of `result` or `error` the response has.
public struct ResponseHeader: Decodable, Sendable {
    public var id: RequestID?
    public var error: RPCError?
}

/// The `error` member of a response. `message` is one sentence a user can act on;
/// `data` carries the machine-readable details.
public struct RPCError: Codable, Sendable, Error, Equatable {
    public var code: Int
    public var message: String
    public var data: ErrorData?

    public init(_ code: RPCErrorCode, _ message: String, data: ErrorData? = nil) {
        self.code = code.rawValue
        self.message = message
        self.data = data
    }

    /// The project's own code, when the number is one of ours or JSON-RPC's.
    public var kind: RPCErrorCode? { RPCErrorCode(rawValue: code) }
}

/// Machine-readable details of an error. Never holds a token or a secret.
public struct ErrorData: Codable, Sendable, Equatable {
    /// The provider the error concerns.
    public var provider: String?
    /// The OAuth `error` code the provider answered (RFC 6749 §5.2), for provider errors.
    public var oauthError: String?
    /// Seconds after which a retry may succeed (provider unreachable, back-off).
    public var retryAfter: Int?
    /// For limit errors: the limit that was exceeded.
    public var limit: Int?
    /// For "secret store unavailable": what is wrong with it (`unavailable`, `locked`,
    /// `timed_out`, `failed`).
    public var reason: String?
    /// For "untrusted authorization server": the resource and the server its metadata names,
    /// with the hosts the user is shown.
    public var resource: String?
    public var issuer: String?
    public var resourceHost: String?
    public var issuerHost: String?

    public init(provider: String? = nil, oauthError: String? = nil, retryAfter: Int? = nil, limit: Int? = nil,
                reason: String? = nil, resource: String? = nil, issuer: String? = nil,
                resourceHost: String? = nil, issuerHost: String? = nil) {
        self.provider = provider
        self.oauthError = oauthError
        self.retryAfter = retryAfter
        self.limit = limit
        self.reason = reason
        self.resource = resource
        self.issuer = issuer
        self.resourceHost = resourceHost
        self.issuerHost = issuerHost
    }

    enum CodingKeys: String, CodingKey {
        case provider
        case oauthError = "oauth_error"
        case retryAfter = "retry_after"
        case limit, reason, resource, issuer
        case resourceHost = "resource_host"
        case issuerHost = "issuer_host"
    }
}
