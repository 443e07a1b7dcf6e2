import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// How one transfer of `URLSessionTransport` ended.
enum TransferOutcome: Sendable {
    case response(HTTPResponse)
    case tooLarge
    case timedOut
    case cancelled
    case failed(any Error)
}

/// Receives one data task's events: collects the body up to a limit, refuses redirects,
/// and hands the outcome over exactly once (completion, time-out or cancellation).
final class TransferDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var continuation: CheckedContinuation<TransferOutcome, Never>?
        var task: URLSessionDataTask?
        var response: HTTPResponse?
        var body: [UInt8] = []
        var done = false
    }

    private let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Starts `task` and waits for its outcome, for `timeout` seconds at most.
    func run(_ task: URLSessionDataTask, timeout: TimeInterval) async -> TransferOutcome {
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .seconds(timeout))
            if !Task.isCancelled { self?.finish(.timedOut) }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let start = state.withLock { state -> Bool in
                    guard !state.done else { return false }
                    state.continuation = continuation
                    state.task = task
                    return true
                }
                if start { task.resume() } else { continuation.resume(returning: .cancelled) }
            }
        } onCancel: {
            finish(.cancelled)
        }
    }

    /// Hands `outcome` over unless one already was, and stops the task.
    private func finish(_ outcome: TransferOutcome) {
        typealias Pending = (continuation: CheckedContinuation<TransferOutcome, Never>?, task: URLSessionDataTask?)
        let pending = state.withLock { state -> Pending? in
            guard !state.done else { return nil }
            state.done = true
            defer { state.continuation = nil; state.task = nil }
            return (state.continuation, state.task)
        }
        guard let (continuation, task) = pending else { return }
        continuation?.resume(returning: outcome)
        if case .response = outcome { return }
        task?.cancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if response.expectedContentLength > Int64(limit) {
            completionHandler(.cancel)
            finish(.tooLarge)
            return
        }
        if let http = response as? HTTPURLResponse {
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            let answer = HTTPResponse(status: http.statusCode, headers: headers)
            state.withLock { $0.response = answer }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let tooLarge = state.withLock { state -> Bool in
            state.body.append(contentsOf: data)
            return state.body.count > limit
        }
        if tooLarge { finish(.tooLarge) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let error {
            finish(.failed(error))
            return
        }
        let response = state.withLock { state in
            state.response.map { HTTPResponse(status: $0.status, headers: $0.headers, body: state.body) }
        }
        if let response {
            finish(.response(response))
        } else {
            finish(.failed(URLError(.badServerResponse)))
        }
    }
}
