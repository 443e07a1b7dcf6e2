import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPTransport` over Foundation's `URLSession` (libcurl on Linux).
///
/// Each request gets its own ephemeral session: no cookies, no cache, no credential
/// store. Redirects are never followed; a 3xx comes back as the response. The whole
/// request, connection to last byte, must finish within `timeout`. A body larger than
/// `maximumBodySize` is abandoned and reported as `OAuthError.invalidResponse`.
/// Proxies come from the environment (`HTTPS_PROXY`, `https_proxy`, `NO_PROXY`), which
/// libcurl honours by itself.
public final class URLSessionTransport: HTTPTransport {
    /// The largest answer body accepted: 1 MiB.
    public static let maximumBodySize = 1 << 20

    /// Seconds allowed for one whole request.
    public let timeout: TimeInterval

    /// Makes a transport whose requests each fail after `timeout` seconds.
    public init(timeout: TimeInterval = 10) {
        self.timeout = timeout
    }

    /// Sends `request`; see the type's description for the rules.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(),
              scheme == "https" || scheme == "http", url.host != nil
        else { throw .configuration("\(EndpointPolicy.describe(request.url)) is not an http(s) URL") }
        let host = EndpointPolicy.hostAndPort(url)

        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        urlRequest.httpShouldHandleCookies = false
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let body = request.body { urlRequest.httpBody = Data(body) }

        let transfer = TransferDelegate(limit: Self.maximumBodySize)
        let session = URLSession(configuration: makeConfiguration(), delegate: transfer, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let outcome = await transfer.run(session.dataTask(with: urlRequest), timeout: timeout)

        switch outcome {
        case .response(let response):
            return response
        case .tooLarge:
            throw .invalidResponse("\(host) sent an answer larger than 1 MiB")
        case .timedOut:
            throw .unreachable("cannot reach \(host): no answer within \(Self.seconds(timeout))")
        case .cancelled:
            throw .unreachable("the request to \(host) was cancelled")
        case .failed(let error):
            throw Self.map(error, host: host, timeout: timeout)
        }
    }

    private func makeConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.urlCredentialStorage = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        return configuration
    }

    static func seconds(_ interval: TimeInterval) -> String {
        interval == interval.rounded() ? "\(Int(interval)) s" : "\(interval) s"
    }

    /// Turns a transfer failure into a sentence naming only the host.
    static func map(_ error: any Error, host: String, timeout: TimeInterval) -> OAuthError {
        guard let urlError = error as? URLError else { return .unreachable("cannot reach \(host)") }
        let reason: String
        switch urlError.code {
        case .cannotConnectToHost: reason = "connection refused"
        case .timedOut: reason = "no answer within \(seconds(timeout))"
        case .cannotFindHost, .dnsLookupFailed: reason = "the host name could not be resolved"
        case .networkConnectionLost: reason = "the connection was lost"
        case .notConnectedToInternet: reason = "the network is down"
        case .secureConnectionFailed: reason = "the TLS handshake failed"
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateHasUnknownRoot,
             .serverCertificateNotYetValid:
            reason = "its TLS certificate is not trusted"
        case .clientCertificateRejected, .clientCertificateRequired: reason = "it asked for a TLS client certificate"
        case .badServerResponse, .cannotParseResponse:
            return .invalidResponse("\(host) answered something that is not HTTP")
        case .cancelled: return .unreachable("the request to \(host) was cancelled")
        default: reason = "the transfer failed (URL error \(urlError.code.rawValue); check the network and any proxy)"
        }
        return .unreachable("cannot reach \(host): \(reason)")
    }
}
